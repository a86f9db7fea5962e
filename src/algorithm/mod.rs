//! The rate-limiting algorithms. Each is written once, over the
//! [`Store`](crate::store::Store) contract, with time from a
//! [`Clock`](crate::Clock).
//!
//! | algorithm | store work per decision | keys per client | accuracy |
//! |---|---|---|---|
//! | [`FixedWindow`] | 1 increment | 1 live | exact within a window; up to 2× the limit across a boundary |
//! | [`SlidingWindow`], `n` sub-windows | 1 increment + `n` reads, one round trip | `n + 1` live | exact under a steady rate; errs by at most the oldest sub-window's count × elapsed share |
//!
//! A denied request costs one more round trip (the refund) unless denied
//! requests are counted ([`DeniedRequests`](crate::DeniedRequests)).

mod buckets;
mod fixed_window;
mod gcra;
mod optimistic;
mod sliding_window;
mod token_bucket;
mod window;
mod window_math;

pub use fixed_window::{FixedWindow, FixedWindowConfig};
pub use gcra::{Gcra, GcraConfig, Reservation};
pub use optimistic::{CasPolicy, CasStats};
pub use sliding_window::{SlidingWindow, SlidingWindowConfig, MAX_SUB_WINDOWS};
pub use token_bucket::{TokenBucket, TokenBucketConfig};
