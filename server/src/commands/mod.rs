//! Every command: reading its arguments, and running it. Connection
//! commands (`PING`, `AUTH`, `HELLO`...) answer at once, in order; the
//! rate-limit commands become [`Job`]s that the connection runs together,
//! so that one store round trip can serve many of them.

pub mod admin;
pub mod args;
pub mod cell;
pub mod smyte;
pub mod table;
pub mod window;

use bytes::Bytes;

use self::smyte::Variant;
use crate::info::info;
use crate::resp::Reply;
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::Outcome;

/// A rate-limit command, ready to run against the store.
#[derive(Debug, Clone)]
pub enum Job {
    Smyte(Variant, smyte::Request),
    Cell(cell::Request),
    Window(window::Request),
}

impl Job {
    /// The bucket it touches: jobs on one bucket run in the order they
    /// came, jobs on others side by side.
    pub fn lane(&self) -> (&'static str, &Bytes) {
        match self {
            Self::Smyte(_, request) => ("rl", &request.key),
            Self::Cell(request) => ("cl", &request.key),
            Self::Window(request) => ("rw", &request.key),
        }
    }

    /// The command's name, lower case.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Smyte(variant, _) => variant.name,
            Self::Cell(_) => "cl.throttle",
            Self::Window(_) => "rl.window",
        }
    }

    /// Runs it, and says what it decided.
    pub async fn run(self, shared: &Shared) -> (Reply, Outcome) {
        let limiters = &shared.limiters;
        match self {
            Self::Smyte(variant, request) => {
                smyte::run(limiters, variant, request, chrono::Utc::now()).await
            }
            Self::Cell(request) => cell::run(limiters, request).await,
            Self::Window(request) => window::run(limiters, request).await,
        }
    }
}

/// What one command comes to.
#[derive(Debug)]
pub enum Step {
    /// Answered at once.
    Reply(Reply),
    /// To run against the store.
    Job(Job),
    /// `QUIT`: answer OK, then close.
    Quit,
}

/// Reads `args` (the name first) and answers it, or makes it a [`Job`].
pub fn prepare(args: &[Bytes], session: &mut Session, shared: &Shared) -> Step {
    let Some(given) = args.first() else {
        return Step::Reply(Reply::error("ERR empty command"));
    };
    let mut buffer = [0; 16];
    let name = lower_case(given, &mut buffer);
    if !session.authenticated && !matches!(name, "auth" | "hello" | "quit") {
        return Step::Reply(Reply::error(admin::NOAUTH));
    }
    let job = |parsed: Result<Job, Reply>| match parsed {
        Ok(job) => Step::Job(job),
        Err(reply) => {
            if let Some(counts) = shared.stats.command(name) {
                counts.record(Outcome::Error);
            }
            Step::Reply(reply)
        }
    };
    let smyte = |variant: Variant| job(smyte::parse(variant, args).map(|r| Job::Smyte(variant, r)));
    Step::Reply(match name {
        "rl.reduce" => return smyte(Variant::REDUCE),
        "rl.get" => return smyte(Variant::GET),
        "rl.preduce" => return smyte(Variant::PREDUCE),
        "rl.pget" => return smyte(Variant::PGET),
        "rl.sessionize" => return smyte(Variant::SESSIONIZE),
        "rl.psessionize" => return smyte(Variant::PSESSIONIZE),
        "cl.throttle" => return job(cell::parse(args).map(Job::Cell)),
        "rl.window" => return job(window::parse(args).map(Job::Window)),
        "quit" => return Step::Quit,
        "ping" => admin::ping(args),
        "echo" => admin::echo(args),
        "select" => admin::select(args),
        "auth" => admin::auth(args, session, shared),
        "hello" => admin::hello(args, session, shared),
        "client" => admin::client(args, session),
        "command" => admin::command(args),
        "info" => info(args, shared),
        _ => unknown(args),
    })
}

/// `name` in lower case, written in `buffer` (no allocation per command);
/// empty, which names no command, when it is longer than any command's
/// name or not text.
fn lower_case<'b>(name: &[u8], buffer: &'b mut [u8; 16]) -> &'b str {
    let Some(lower) = buffer.get_mut(..name.len()) else {
        return "";
    };
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    std::str::from_utf8(lower).unwrap_or("")
}

/// Redis's answer to a command it does not know.
fn unknown(args: &[Bytes]) -> Reply {
    let name = args
        .first()
        .map(|name| args::shown(name))
        .unwrap_or_default();
    let mut message = format!(
        "ERR unknown command '{}', with args beginning with: ",
        name.to_ascii_lowercase()
    );
    for arg in args.iter().skip(1).take(16) {
        message.push_str(&format!("'{}' ", args::shown(arg)));
    }
    Reply::error(message)
}
