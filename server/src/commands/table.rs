//! The commands this server knows, as `COMMAND` describes them: the name,
//! the arity (negative: at least that many, the name included), flags,
//! and the position of the key.

/// One command.
#[derive(Debug)]
pub struct Entry {
    pub name: &'static str,
    pub arity: i64,
    pub flags: &'static [&'static str],
    /// The key's position, 0 when the command has none.
    pub first_key: i64,
}

const fn entry(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    first_key: i64,
) -> Entry {
    Entry {
        name,
        arity,
        flags,
        first_key,
    }
}

const WRITE: &[&str] = &["write", "fast"];
const READ: &[&str] = &["readonly", "fast"];
const CONNECTION: &[&str] = &["fast", "loading", "stale", "no_auth"];

/// Every command, in `COMMAND`'s order.
pub const COMMANDS: [Entry; 17] = [
    entry("rl.reduce", -4, WRITE, 1),
    entry("rl.get", -4, READ, 1),
    entry("rl.preduce", -4, WRITE, 1),
    entry("rl.pget", -4, READ, 1),
    entry("rl.sessionize", -4, WRITE, 1),
    entry("rl.psessionize", -4, WRITE, 1),
    entry("cl.throttle", -5, WRITE, 1),
    entry("rl.window", -4, WRITE, 1),
    entry("ping", -1, &["fast", "stale"], 0),
    entry("echo", 2, &["fast"], 0),
    entry("quit", -1, CONNECTION, 0),
    entry("hello", -1, CONNECTION, 0),
    entry("auth", -2, CONNECTION, 0),
    entry("client", -2, &["loading", "stale"], 0),
    entry("command", -1, &["loading", "stale"], 0),
    entry("select", 2, &["loading", "stale", "fast"], 0),
    entry("info", -1, &["loading", "stale"], 0),
];
