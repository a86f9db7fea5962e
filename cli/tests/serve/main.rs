//! `memcache-ratelimit serve` with real clients: redis-cli, Python's
//! `redis` and Node's `ioredis`, on the embedded store and on real
//! memcached, and several servers sharing one memcached.

mod clients;
mod operation;
mod process;
mod redis_cli;
mod shared_fleet;
