//! One client connection: read, answer every command read, write, again.
//!
//! Commands arrive pipelined, many per read. The connection commands are
//! answered in order as they are read; the rate-limit commands of one read
//! run side by side, those on one bucket in the order they came, so their
//! store calls go out together and one store round trip serves the batch.
//! The replies are written in the order of the commands.

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::commands::{prepare, Job, Step};
use crate::resp::{parse, Protocol, Reply};
use crate::session::Session;
use crate::shared::Shared;

/// The most commands answered per batch; more wait for the next one.
const MAX_BATCH: usize = 1024;

/// Serves `stream` until the client leaves, sends `QUIT` or malformed
/// input, or the server stops (`stopping` turns true), in which case the
/// commands already read are answered first.
pub async fn serve(
    mut stream: TcpStream,
    shared: Arc<Shared>,
    mut stopping: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let mut session = Session::new(shared.next_id(), shared.config.requirepass.is_some());
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut output = BytesMut::with_capacity(16 * 1024);
    loop {
        let mut commands = Vec::new();
        let mut broken = None;
        while commands.len() < MAX_BATCH {
            match parse(&mut input, &shared.config.limits) {
                Ok(Some(args)) => commands.push(args),
                Ok(None) => break,
                Err(error) => {
                    broken = Some(error);
                    break;
                }
            }
        }
        let mut close = false;
        if !commands.is_empty() {
            shared.stats.commands_processed.add(commands.len() as u64);
            close = answer(&commands, &mut session, &shared, &mut output).await;
        }
        if let Some(error) = &broken {
            shared.stats.protocol_errors.add(1);
            tracing::debug!(client = session.id, %error, "protocol error; closing the connection");
            Reply::error(format!("ERR {error}")).encode(session.protocol, &mut output);
            close = true;
        }
        if !output.is_empty() {
            if stream.write_all(&output).await.is_err() {
                return;
            }
            output.clear();
        }
        if close || (*stopping.borrow() && commands.is_empty()) {
            let _ = stream.shutdown().await;
            return;
        }
        if commands.len() == MAX_BATCH {
            continue;
        }
        tokio::select! {
            read = stream.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = stopping.changed() => {}
        }
    }
}

/// One item, or several in the order they came: most lanes of a read hold
/// one job (and give one reply), which then needs no vector.
enum OneOrMany<T> {
    One(usize, T),
    Many(Vec<(usize, T)>),
}

impl<T> OneOrMany<T> {
    fn push(&mut self, at: usize, item: T) {
        *self = match std::mem::replace(self, Self::Many(Vec::new())) {
            Self::One(first_at, first) => Self::Many(vec![(first_at, first), (at, item)]),
            Self::Many(mut items) => {
                items.push((at, item));
                Self::Many(items)
            }
        };
    }
}

/// The jobs of one bucket in one read, each with the position of its
/// command.
type Lane = OneOrMany<Job>;

/// A lane's replies, each with the position of its command.
type Done = OneOrMany<Reply>;

/// Runs `job` and counts it.
async fn run(job: Job, shared: &Shared) -> Reply {
    let name = job.name();
    // The clock is read only for the latency histogram.
    let began = shared.config.metrics.is_some().then(Instant::now);
    let (reply, outcome) = job.run(shared).await;
    if let Some(counts) = shared.stats.command(name) {
        counts.record(outcome);
    }
    if let Some(began) = began {
        crate::metrics::decision(name, outcome, began.elapsed());
    }
    reply
}

/// Answers `commands` into `output`; true when the connection must close
/// after writing (`QUIT`).
async fn answer(
    commands: &[Vec<bytes::Bytes>],
    session: &mut Session,
    shared: &Shared,
    output: &mut BytesMut,
) -> bool {
    let mut replies: Vec<(Protocol, Option<Reply>)> = Vec::with_capacity(commands.len());
    let mut lanes: Vec<Lane> = Vec::new();
    let mut lane_of: foldhash::HashMap<(&'static str, bytes::Bytes), usize> =
        foldhash::HashMap::with_capacity_and_hasher(commands.len(), Default::default());
    let mut quit = false;
    for args in commands {
        let at = replies.len();
        let step = prepare(args, session, shared);
        replies.push((session.protocol, None));
        match step {
            Step::Reply(reply) => replies[at].1 = Some(reply),
            Step::Job(job) => {
                let (namespace, key) = job.lane();
                let next = lanes.len();
                let lane = *lane_of.entry((namespace, key.clone())).or_insert(next);
                if lane == next {
                    lanes.push(Lane::One(at, job));
                } else {
                    lanes[lane].push(at, job);
                }
            }
            Step::Quit => {
                replies[at].1 = Some(Reply::ok());
                quit = true;
                break;
            }
        }
    }
    // Each lane is polled only when its store call wakes it (`join_all`
    // polls every lane on every wake-up, quadratic in the lanes of a read).
    // A lane's future is built in its box: pushed as it is (2.6 KB), it
    // was copied three times on the way into its task.
    let mut running: FuturesUnordered<_> = lanes
        .into_iter()
        .map(|lane| {
            Box::pin(async move {
                match lane {
                    Lane::One(at, job) => Done::One(at, run(job, shared).await),
                    Lane::Many(jobs) => {
                        let mut done = Vec::with_capacity(jobs.len());
                        for (at, job) in jobs {
                            done.push((at, run(job, shared).await));
                        }
                        Done::Many(done)
                    }
                }
            })
        })
        .collect();
    while let Some(done) = running.next().await {
        match done {
            Done::One(at, reply) => replies[at].1 = Some(reply),
            Done::Many(done) => {
                for (at, reply) in done {
                    replies[at].1 = Some(reply);
                }
            }
        }
    }
    for (protocol, reply) in replies {
        reply
            .unwrap_or_else(|| Reply::error("ERR no reply"))
            .encode(protocol, output);
    }
    quit
}
