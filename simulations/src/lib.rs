//! Simulations of `memcache-ratelimit`: every algorithm, on seeded
//! workloads, judged against an exact sliding window. Only the library's
//! public API is used, on the embedded `MemoryStore` and `ManualClock`s, so
//! every run is deterministic for a given seed.
//!
//! - [`workload`]: the workloads (built from the arrival processes in
//!   [`traffic`]), and [`populations`]: three Cloudflare-like populations
//!   that differ in the shape of each source's traffic;
//! - [`algorithms`]: the algorithms under test, the in-process caches they
//!   can run with, and how each is built;
//! - [`oracle`]: the exact sliding window;
//! - [`runner`]: one algorithm on one workload, decision by decision;
//! - [`metrics`]: what is measured, as defined in `simulations/README.md`;
//! - [`strict`]: Cloudflare's measure, each algorithm in strict mode
//!   against the exact count of every request sent;
//! - [`suite`]: every algorithm on every workload, and the caches
//!   comparison, over a few threads;
//! - [`estimators`]: the sliding window's uniform rule against its
//!   moment-corrected estimators;
//! - [`report`]: the markdown tables and the CSV files;
//! - [`figures`]: the SVG figures, drawn by [`plot`];
//! - [`generated`]: the tables that the project's documentation shows,
//!   written from the run so that none is typed by hand;
//! - [`cli`]: the command line, for the `simulations` binary and the
//!   operator CLI.

pub mod algorithms;
pub mod cli;
pub mod estimators;
pub mod figures;
pub mod generated;
pub mod metrics;
pub mod oracle;
pub mod plot;
pub mod populations;
pub mod report;
pub mod runner;
pub mod strict;
pub mod suite;
pub mod trace;
pub mod traffic;
pub mod workload;
