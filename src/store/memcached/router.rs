//! Server placement for a memcached fleet.

use memcache::exp::Router;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::key::routing_prefix;

/// Rendezvous (highest random weight) placement on a client's
/// [`routing_prefix`], with XXH3, a hash whose output is fixed by its
/// specification. So every process, on any platform and any Rust release,
/// places a client on the same server, and all of one client's keys go to
/// that server. Adding or removing a server moves only the clients that
/// belonged to it.
///
/// The `memcache` crate's default router hashes with the standard library's
/// `DefaultHasher`, whose output may change between Rust releases; two
/// services built with different compilers would then count one client on
/// two servers. This router replaces it.
///
/// ```
/// use memcache::exp::Router;
/// use memcache_ratelimit::store::ClientRouter;
///
/// let servers = vec!["10.0.0.1:11211".to_string(), "10.0.0.2:11211".to_string()];
/// let router = ClientRouter;
/// let minute = router.route(b"rl:alice_202611220107", &servers);
/// let next = router.route(b"rl:alice_202611220108", &servers);
/// assert_eq!(minute, next);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientRouter;

impl ClientRouter {
    /// The index in `servers` (identities as configured) that holds `key`.
    pub fn place(key: &[u8], servers: &[String]) -> usize {
        if servers.len() < 2 {
            // Nothing to choose: skip the hashing.
            return 0;
        }
        let client = routing_prefix(key);
        let mut best = (0, 0u64);
        for (index, server) in servers.iter().enumerate() {
            let score = xxh3_64_with_seed(client, xxh3_64(server.as_bytes()));
            if index == 0 || score > best.1 {
                best = (index, score);
            }
        }
        best.0
    }
}

impl Router for ClientRouter {
    fn route(&self, key: &[u8], servers: &[String]) -> usize {
        Self::place(key, servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("127.0.0.1:{}", 11211 + i)).collect()
    }

    #[test]
    fn placement_is_fixed_by_the_hash_specification() {
        // Golden values: these must never change, or a fleet upgraded one
        // process at a time would count clients on two servers. The
        // reference XXH3 implementation (Python `xxhash`) gives the same.
        let three = servers(3);
        let placed: Vec<usize> = [
            "rl:alice", "rl:bob", "rl:carol", "rl:dave", "rl:erin", "rl:frank",
        ]
        .iter()
        .map(|client| ClientRouter::place(format!("{client}_202611220107").as_bytes(), &three))
        .collect();
        assert_eq!(placed, GOLDEN);
    }

    const GOLDEN: [usize; 6] = [2, 2, 1, 0, 1, 1];

    #[test]
    fn one_server_holds_every_key() {
        let one = servers(1);
        for key in ["rl:alice_1", "", "no-prefix", "rl:\u{0}_9"] {
            assert_eq!(ClientRouter::place(key.as_bytes(), &one), 0);
        }
    }

    #[test]
    fn removing_a_server_moves_only_its_clients() {
        let four = servers(4);
        let mut three = four.clone();
        three.remove(2);
        for n in 0..2000 {
            let key = format!("rl:c{n}_1");
            let before = ClientRouter::place(key.as_bytes(), &four);
            let after = ClientRouter::place(key.as_bytes(), &three);
            if before != 2 {
                assert_eq!(three[after], four[before]);
            }
        }
    }
}
