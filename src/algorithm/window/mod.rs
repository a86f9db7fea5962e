//! The window algorithms: counters in time buckets, one atomic increment
//! per decision.
//!
//! - [`fixed`]: the fixed window, one counter per calendar window;
//! - [`sliding`]: the approximated sliding window over `n` sub-windows;
//! - [`engine`]: the increment-and-read both share, with the refund of a
//!   denial and the repair of a wrapped counter ([`repair`]);
//! - [`decode`]: what the counters read mean (plain or packed counts);
//! - [`math`]: the estimate and the exact integer decision, pure;
//! - [`moment`]: the packed counter and the moment-corrected weight of
//!   the oldest sub-window, pure;
//! - [`buckets`]: time to bucket indices and key suffixes;
//! - [`sealed`]: the cache of buckets that can no longer change.

mod buckets;
mod decode;
mod engine;
mod fixed;
mod math;
mod moment;
mod repair;
mod sealed;
mod sliding;

pub(crate) use self::buckets::unix_nanos;
pub(crate) use self::engine::WindowCounter;
pub use self::fixed::FixedWindow;
pub use self::moment::{Estimator, MAX_MOMENT_COUNT};
pub use self::sliding::{
    SlidingWindow, DEFAULT_SEALED_CACHE, DEFAULT_SUB_WINDOWS, MAX_SUB_WINDOWS,
};
