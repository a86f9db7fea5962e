//! What memcached is sent for lifetimes and what a server address looks
//! like: rules both protocols share.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::store::ttl_secs;

/// The longest expiration time memcached reads as relative: 30 days. A
/// larger number is read as an absolute unix time, in the classic and the
/// meta protocol alike (memcached's `protocol.txt`, "Expiration times").
const MAX_RELATIVE_TTL: u64 = 30 * 24 * 3600;

/// The expiration time to send memcached, in either protocol, for an item
/// that should live `ttl` from now: [`ttl_secs`] up to 30 days, and beyond
/// that the unix time it should expire at, since memcached would read a
/// larger relative number as a moment in 1970 and expire the item at once.
/// Every write that sets a lifetime (an increment that creates its counter,
/// `add`, `set`, `cas`, and their meta forms) sends this.
pub(crate) fn wire_ttl(ttl: Duration) -> u32 {
    wire_ttl_at(ttl, SystemTime::now)
}

/// [`wire_ttl`] at the moment `now` returns, read only for a lifetime
/// beyond 30 days: every decision's write sends a lifetime, nearly always
/// a short one, and a clock read is some 20 ns. memcached parses an
/// expiration time as a signed 32-bit number, so an absolute time is
/// capped at its largest (January 2038).
fn wire_ttl_at(ttl: Duration, now: impl FnOnce() -> SystemTime) -> u32 {
    let secs = ttl_secs(ttl);
    let wire = if secs > MAX_RELATIVE_TTL {
        let now = now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        // Past 30 days from the epoch, so never read as relative.
        now.saturating_add(secs).max(MAX_RELATIVE_TTL + 1)
    } else {
        secs
    };
    u32::try_from(wire.min(i32::MAX as u64)).unwrap_or(i32::MAX as u32)
}

/// `host:port`, with a port number: a server address as configured.
pub(crate) fn is_host_port(server: &str) -> bool {
    server
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix: u64) -> impl Fn() -> SystemTime + Copy {
        move || UNIX_EPOCH + Duration::from_secs(unix)
    }

    #[test]
    fn lifetimes_up_to_30_days_are_sent_relative_and_longer_ones_as_unix_times() {
        let now = at(1_800_000_000);
        let day = Duration::from_secs(86_400);
        let unread = || -> SystemTime { panic!("the clock is read only past 30 days") };
        assert_eq!(wire_ttl_at(day * 30, unread), 2_592_000);
        assert_eq!(wire_ttl_at(Duration::from_millis(1), now), 1);
        assert_eq!(wire_ttl_at(Duration::from_millis(1500), now), 2);
        assert_eq!(wire_ttl_at(day * 30, now), 2_592_000);
        assert_eq!(
            wire_ttl_at(day * 30 + Duration::from_secs(1), now),
            1_802_592_001
        );
        assert_eq!(wire_ttl_at(day * 365, now), 1_831_536_000);
        // A clock before the epoch still sends a time memcached reads as
        // absolute (and past), never as a relative number.
        assert_eq!(
            wire_ttl_at(day * 31, || UNIX_EPOCH - Duration::from_secs(5)),
            2_678_400
        );
        // memcached's expiration time is a signed 32-bit number.
        assert_eq!(wire_ttl_at(day * 365, at(2_147_000_000)), i32::MAX as u32);
    }
}
