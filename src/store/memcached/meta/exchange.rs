//! One meta-protocol exchange: requests for one server written at once on
//! a pooled connection, and every reply read back to its operation, under
//! one deadline for the whole exchange (or its caller's, when it is
//! [`detached`]).
//!
//! Attribution, per operation:
//!
//! - a reply read is that operation's answer, whatever follows;
//! - an error line (`CLIENT_ERROR`, `SERVER_ERROR`) is its operation's
//!   answer, and reading stops there: memcached goes on executing the
//!   rest, whose answers are never read (each says so, ambiguous if it
//!   writes);
//! - a failure of the stream (or the deadline) leaves every operation not
//!   yet answered with that failure, ambiguous if it writes and any byte
//!   of the request was written.
//!
//! The connection goes back to the pool only when every reply was read.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::reply::{read, Failure};
use super::request::{Request, Verb};
use crate::error::{StoreError, StoreErrorKind};
use crate::store::memcached::connection::Connection;
use crate::store::memcached::detach::{detached, Detached};
use crate::store::memcached::pool::{Checkout, Pools, Slot};
use crate::timer::{timeout_in, TimerQueue};

pub(crate) use super::answers::Answers;

/// Runs `requests` (requests, or jobs that carry one) on `checkout`, a
/// connection from `pools`, within the limit of `bound`, into `answers`,
/// one list per request, each empty with room for its operations
/// ([`room_for`]). Ends with the checkout when every reply was read, for
/// the caller to use again or give back.
pub(crate) fn exchange<'a, R: AsRef<Request>>(
    pools: &'a Pools,
    checkout: Checkout,
    requests: &'a [R],
    answers: &'a mut [Answers],
    bound: &'a TimerQueue,
) -> impl Future<Output = Option<Checkout>> + 'a {
    debug_assert_eq!(requests.len(), answers.len());
    // Taken apart before the future, which then holds the parts alone.
    let server = checkout.server();
    let (mut connection, slot) = checkout.into_parts();
    async move {
        let address = pools.address(server);
        let exchanged = send_and_read(&mut connection, requests, answers, address);
        let stop = timeout_in(bound, exchanged).await.unwrap_or_else(|| {
            Some(Failure::Broken(StoreError::new(
                StoreErrorKind::Timeout,
                format!(
                    "no answer within {:?}; the connection was closed",
                    bound.limit()
                ),
            )))
        });
        finish(pools, server, connection, slot, requests, answers, stop)
            .map(|(connection, slot)| Checkout::from_parts(server, connection, slot))
    }
}

/// Ends an exchange that stopped at `stop` (`None`: every reply read):
/// its connection and slot to use again, or every operation not answered
/// given why (and the connection closed).
fn finish<R: AsRef<Request>>(
    pools: &Pools,
    server: usize,
    connection: Connection,
    slot: Slot,
    requests: &[R],
    answers: &mut [Answers],
    stop: Option<Failure>,
) -> Option<(Connection, Slot)> {
    match stop {
        None => Some((connection, slot)),
        Some(stop) => {
            let address = pools.address(server);
            let wrote = connection.wrote();
            for (request, answers) in requests.iter().zip(answers) {
                for verb in request.as_ref().verbs().skip(answers.len()) {
                    answers.push(Err(unanswered(&stop, verb, wrote, address)));
                }
            }
            None
        }
    }
}

/// Empty answers with room for those of `request`.
pub(crate) fn room_for<R: AsRef<Request>>(request: &R) -> Answers {
    Answers::with_capacity(request.as_ref().len())
}

/// One request's exchange, run [`detached`]: bounded by its caller
/// while it waits, with no timer of its own, and a caller that stops
/// waiting leaves it `drain` to read its replies and keep its connection.
/// `held` (a batch slot, say) is kept until it ends, whether its caller
/// still waits or not.
///
/// A plain function, not an `async fn`: the exchange is boxed at once, so
/// the future of every call that awaits this carries a pointer, not the
/// exchange's arguments. The box holds the connection once, taken apart
/// before it, and no timeout: at 1,272 bytes, when it held the checkout
/// too and [`exchange`]'s bounded branch, allocating and freeing it went
/// past glibc's per-thread cache of small blocks (up to 1,032 bytes) and
/// cost some 280 to 500 instructions more a decision (callgrind).
pub(crate) fn exchange_one(
    pools: Arc<Pools>,
    checkout: Checkout,
    request: Request,
    drain: Duration,
    held: impl Send + 'static,
) -> Detached<Answers> {
    detached(|| one_exchange(pools, checkout, request, held), drain)
}

/// The future that [`exchange_one`] boxes.
fn one_exchange(
    pools: Arc<Pools>,
    checkout: Checkout,
    request: Request,
    held: impl Send + 'static,
) -> impl Future<Output = Answers> + Send + 'static {
    let server = checkout.server();
    let (mut connection, slot) = checkout.into_parts();
    async move {
        // One request: its answers need no list around them.
        let mut answers = [room_for(&request)];
        let requests = std::slice::from_ref(&request);
        let address = pools.address(server);
        let stop = send_and_read(&mut connection, requests, &mut answers, address).await;
        let done = finish(
            &pools,
            server,
            connection,
            slot,
            requests,
            &mut answers,
            stop,
        );
        if let Some((connection, slot)) = done {
            pools.give_back(server, connection, slot);
        }
        drop(held);
        let [answers] = answers;
        answers
    }
}

/// Writes every request in one write, then reads the replies into
/// `answers`; `None` when every reply was read.
async fn send_and_read<R: AsRef<Request>>(
    connection: &mut Connection,
    requests: &[R],
    answers: &mut [Answers],
    address: &str,
) -> Option<Failure> {
    let sent = match requests {
        [request] => connection.send(request.as_ref().bytes()).await,
        _ => {
            connection
                .send_joined(requests.iter().map(|request| request.as_ref().bytes()))
                .await
        }
    };
    if let Err(error) = sent {
        return Some(Failure::Broken(error));
    }
    for (request, answers) in requests.iter().zip(answers) {
        for verb in request.as_ref().verbs() {
            match read(connection, verb).await {
                Ok(reply) => answers.push(Ok(reply)),
                Err(failure) => {
                    if let Failure::Answered(error) = &failure {
                        answers.push(Err(error.clone().at(address)));
                    }
                    return Some(failure);
                }
            }
        }
    }
    None
}

/// The answer of an operation whose reply was not read.
fn unanswered(stop: &Failure, verb: Verb, wrote: bool, address: &str) -> StoreError {
    let (error, sent) = match stop {
        Failure::Answered(cause) => (
            StoreError::new(
                StoreErrorKind::Io,
                format!(
                    "answer not read: memcached answered an earlier call in the same pipelined \
                     batch with an error ({}), and reading stops there",
                    cause.message()
                ),
            ),
            true,
        ),
        Failure::Broken(error) => (error.clone(), wrote),
    };
    let error = error.at(address);
    if sent && verb.writes() {
        error.ambiguous()
    } else {
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread_cache::THREAD_CACHED;

    #[tokio::test]
    async fn one_exchange_is_boxed_within_the_allocators_thread_cache() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let pools = Arc::new(Pools::new(&[address], 1, 1, Duration::from_secs(5)));
        let checkout = pools.checkout(0).await.expect("a connection");
        let mut request = Request::default();
        request.increment(b"k", 1, 60);
        let exchange = one_exchange(Arc::clone(&pools), checkout, request, ());
        let size = std::mem::size_of_val(&exchange);
        assert!(size <= THREAD_CACHED, "{size} bytes");
    }
}
