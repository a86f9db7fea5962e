//! The timers that bound how long a call may wait: the limiter's deadline
//! around each decision, and a memcached store's I/O timeout around each
//! exchange.
//!
//! - [`timeout`](mod@timeout): a bound whose timer starts only when the
//!   work first has to wait, on a timer of its own or on one shared by
//!   every bound of the same length;
//! - [`queue`]: the shared timer, deadlines of one length queued in the
//!   order they expire;
//! - [`patience`]: how long the caller polling now will wait, so that a
//!   bound inside a tighter one arms nothing.

mod patience;
mod queue;
mod timeout;

pub(crate) use self::queue::TimerQueue;
#[cfg_attr(not(feature = "memcached"), allow(unused_imports))]
pub(crate) use self::timeout::timeout_in_unless_bounded;
pub(crate) use self::timeout::{timeout, timeout_in, Left, Timeout};
