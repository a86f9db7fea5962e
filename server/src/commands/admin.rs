//! The commands every Redis client sends besides the rate limits: `PING`,
//! `ECHO`, `QUIT`, `HELLO`, `AUTH`, `CLIENT`, `COMMAND`, `SELECT` and
//! `INFO`, answered as Redis answers them (Redis documentation, "Commands",
//! <https://redis.io/docs/latest/commands/>), so that `redis-cli` and the
//! client libraries connect as they would to Redis.

use bytes::Bytes;

use super::args::{integer, is, shown};
use super::table::COMMANDS;
use crate::resp::{Protocol, Reply};
use crate::session::Session;
use crate::shared::Shared;

/// Redis's reply to a command before `AUTH` when a password is required.
pub const NOAUTH: &str = "NOAUTH Authentication required.";

pub fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}' command",
        name.to_ascii_lowercase()
    ))
}

pub fn ping(args: &[Bytes]) -> Reply {
    match args {
        [_] => Reply::Simple("PONG".into()),
        [_, message] => Reply::Bulk(message.clone()),
        _ => wrong_arity("ping"),
    }
}

pub fn echo(args: &[Bytes]) -> Reply {
    match args {
        [_, message] => Reply::Bulk(message.clone()),
        _ => wrong_arity("echo"),
    }
}

/// `SELECT 0` is the one database there is.
pub fn select(args: &[Bytes]) -> Reply {
    match args {
        [_, index] => match integer(index) {
            Some(0) => Reply::ok(),
            Some(_) => Reply::error("ERR DB index is out of range"),
            None => Reply::error("ERR value is not an integer or out of range"),
        },
        _ => wrong_arity("select"),
    }
}

/// `AUTH [username] password`; only the user `default` exists.
pub fn auth(args: &[Bytes], session: &mut Session, shared: &Shared) -> Reply {
    let (user, password) = match args {
        [_, password] => (None, password),
        [_, user, password] => (Some(user), password),
        _ => return wrong_arity("auth"),
    };
    let Some(required) = &shared.config.requirepass else {
        return Reply::error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
    };
    if check(user, password, required) {
        session.authenticated = true;
        Reply::ok()
    } else {
        shared.stats.auth_failures.add(1);
        Reply::error("WRONGPASS invalid username-password pair or user is disabled.")
    }
}

/// Whether `user` (the default user if none) and `password` are the
/// configured ones, comparing every byte whatever the first difference.
fn check(user: Option<&Bytes>, password: &[u8], required: &str) -> bool {
    let user_ok = user.is_none_or(|u| u.as_ref() == b"default");
    let required = required.as_bytes();
    let mut differ = u8::from(password.len() != required.len());
    for (i, byte) in required.iter().enumerate() {
        differ |= byte ^ password.get(i).copied().unwrap_or(!byte);
    }
    user_ok && differ == 0
}

/// `HELLO [protover [AUTH username password] [SETNAME name]]`.
pub fn hello(args: &[Bytes], session: &mut Session, shared: &Shared) -> Reply {
    let mut protocol = session.protocol;
    if let Some(version) = args.get(1) {
        protocol = match integer(version) {
            Some(2) => Protocol::Resp2,
            Some(3) => Protocol::Resp3,
            Some(_) => return Reply::error("NOPROTO unsupported protocol version"),
            None => return Reply::error("ERR Protocol version is not an integer or out of range"),
        };
    }
    let mut i = 2;
    let mut name = None;
    while i < args.len() {
        if is(&args[i], "auth") && i + 2 < args.len() {
            let reply = auth(&args[i..i + 3], session, shared);
            if let Reply::Error(_) = reply {
                return reply;
            }
            i += 3;
        } else if is(&args[i], "setname") && i + 1 < args.len() {
            name = Some(args[i + 1].clone());
            i += 2;
        } else {
            return Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                shown(&args[i])
            ));
        }
    }
    if shared.config.requirepass.is_some() && !session.authenticated {
        return Reply::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
    }
    if name.is_some() {
        session.name = name;
    }
    session.protocol = protocol;
    let field = |name: &str| Reply::Bulk(Bytes::copy_from_slice(name.as_bytes()));
    Reply::Map(vec![
        (field("server"), field("memcache-ratelimit")),
        (field("version"), field(env!("CARGO_PKG_VERSION"))),
        (
            field("proto"),
            Reply::Integer(if protocol == Protocol::Resp3 { 3 } else { 2 }),
        ),
        (field("id"), Reply::Integer(session.id)),
        (field("mode"), field("standalone")),
        (field("role"), field("master")),
        (field("modules"), Reply::Array(Vec::new())),
    ])
}

/// `CLIENT SETNAME`, `GETNAME`, `SETINFO` and `ID`, which client libraries
/// send on connect.
pub fn client(args: &[Bytes], session: &mut Session) -> Reply {
    let Some(sub) = args.get(1) else {
        return wrong_arity("client");
    };
    if is(sub, "setname") && args.len() == 3 {
        session.name = Some(args[2].clone());
        Reply::ok()
    } else if is(sub, "getname") && args.len() == 2 {
        session.name.clone().map_or(Reply::Null, Reply::Bulk)
    } else if is(sub, "setinfo") && args.len() == 4 {
        if is(&args[2], "lib-name") || is(&args[2], "lib-ver") {
            Reply::ok()
        } else {
            Reply::error(format!("ERR Unrecognized option '{}'", shown(&args[2])))
        }
    } else if is(sub, "id") && args.len() == 2 {
        Reply::Integer(session.id)
    } else {
        Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            shown(sub)
        ))
    }
}

/// `COMMAND`, `COMMAND COUNT`, `COMMAND INFO name...` and `COMMAND DOCS`
/// (no documentation: an empty answer, which `redis-cli` accepts).
pub fn command(args: &[Bytes]) -> Reply {
    let info = |entry: &super::table::Entry| {
        let flag = |f: &str| Reply::Simple(f.into());
        Reply::Array(vec![
            Reply::Bulk(Bytes::from_static(entry.name.as_bytes())),
            Reply::Integer(entry.arity),
            Reply::Array(entry.flags.iter().map(|f| flag(f)).collect()),
            Reply::Integer(entry.first_key),
            Reply::Integer(entry.first_key),
            Reply::Integer(i64::from(entry.first_key > 0)),
        ])
    };
    match args.get(1) {
        None => Reply::Array(COMMANDS.iter().map(info).collect()),
        Some(sub) if is(sub, "count") => Reply::Integer(COMMANDS.len() as i64),
        Some(sub) if is(sub, "docs") => Reply::Map(Vec::new()),
        Some(sub) if is(sub, "info") => Reply::Array(
            args[2..]
                .iter()
                .map(|name| {
                    COMMANDS
                        .iter()
                        .find(|entry| is(name, entry.name))
                        .map_or(Reply::Null, info)
                })
                .collect(),
        ),
        Some(sub) => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            shown(sub)
        )),
    }
}
