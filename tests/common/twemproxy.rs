//! Twemproxy (nutcracker) on loopback in front of real memcached
//! processes, from the workspace's test kit. A missing `nutcracker`
//! binary fails the test with instructions; it never skips.

pub use memcache_ratelimit_testkit::Twemproxy;
