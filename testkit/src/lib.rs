//! Real memcached and nutcracker (twemproxy) processes on free loopback
//! ports, for the tests, the CLI's tests, the benchmarks and the
//! simulations of memcache-ratelimit.
//!
//! Every process is started here and stopped when its handle is dropped;
//! nothing else in the workspace launches one. A missing binary fails
//! with instructions on how to install it: it never skips.
//!
//! - [`Memcached`]: one memcached, with the tests' defaults
//!   ([`Memcached::start`]) or its own binary, arguments and CPU
//!   ([`Memcached::builder`]).
//! - [`Twemproxy`]: nutcracker in front of N memcached processes.
//! - [`text`]: `stats`, `flush_all` and `version` over memcached's text
//!   protocol, for any server address, started here or not.
//! - [`binary`]: where the `memcached` and `nutcracker` binaries are.
//!
//! ```no_run
//! use memcache_ratelimit_testkit::Memcached;
//!
//! let server = Memcached::start();
//! assert!(server.address().starts_with("127.0.0.1:"));
//! assert_eq!(server.stat("curr_items"), 0);
//! ```
//!
//! The kit depends on nothing but the standard library (in particular not
//! on memcache-ratelimit), so the library can use it as a
//! dev-dependency.

pub mod binary;
mod memcached;
mod process;
pub mod text;
mod twemproxy;

pub use memcached::{Builder, Memcached, TEST_ARGS};
pub use twemproxy::Twemproxy;
