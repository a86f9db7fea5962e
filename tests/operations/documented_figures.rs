//! The figures the documentation gives for defaults and bounds are the
//! ones the code uses: a changed default fails here until the page that
//! states it says it too.

use std::time::Duration;

use memcache_ratelimit::limiter::DEFAULT_DEADLINE;
use memcache_ratelimit::limiter::DEFAULT_MAX_CLOCK_SKEW;
use memcache_ratelimit::limiter::MAX_DEADLINE;
use memcache_ratelimit::quota::MAX_LIMIT;
use memcache_ratelimit::quota::MAX_PERIOD;
use memcache_ratelimit::quota::MIN_PERIOD;
use memcache_ratelimit::store::{MemcachedStore, DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CONNECTIONS};

/// The pages that state defaults and bounds.
const README: &str = concat!(
    include_str!("../../docs/getting-started.md"),
    include_str!("../../docs/memcached.md"),
    include_str!("../../docs/algorithms.md"),
);

/// The README with line breaks and repeated spaces folded, so a phrase
/// is found wherever the text wraps.
fn readme() -> String {
    README.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn says(phrase: &str) {
    assert!(
        readme().contains(phrase),
        "the documentation does not say {phrase:?}"
    );
}

/// `duration` as the README writes it: `100 ms`, `60 s`.
fn written(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

#[test]
fn the_deadline_figures_are_the_code_s() {
    says(&format!(
        "(`DEFAULT_DEADLINE`, **{}**;",
        written(DEFAULT_DEADLINE)
    ));
    says(&format!("`MAX_DEADLINE`, {})", written(MAX_DEADLINE)));
    says(&format!(
        "the default, {}, leaves room",
        written(DEFAULT_DEADLINE)
    ));
    says(&format!(
        "the default is {}",
        written(DEFAULT_MAX_CLOCK_SKEW)
    ));
}

#[test]
fn the_memcached_store_defaults_are_the_code_s() {
    // The builder's defaults, as its Debug output shows them.
    let defaults = format!("{:?}", MemcachedStore::builder());
    let field = |name: &str| -> String {
        let start = defaults
            .find(&format!("{name}: "))
            .unwrap_or_else(|| panic!("{name} in {defaults}"))
            + name.len()
            + 2;
        let rest = &defaults[start..];
        rest[..rest.find([',', ' ', '}']).unwrap()].to_owned()
    };
    let millis = |text: String| -> String { text.replace("ms", " ms") };
    says(&format!(
        "`.connect_timeout(..)` (default {})",
        millis(field("connect_timeout"))
    ));
    says(&format!(
        "`.io_timeout(..)` (default {})",
        millis(field("io_timeout"))
    ));
    says(&format!(
        "`.max_idle(..)` (default {} idle connections per server)",
        field("max_idle")
    ));
    says(&format!(
        "`.max_connections(..)` (default {} open connections per server)",
        field("max_connections")
    ));
    assert_eq!(
        field("max_connections"),
        DEFAULT_MAX_CONNECTIONS.to_string()
    );
    says(&format!(
        "`.drain_timeout(..)` (default {})",
        written(DEFAULT_DRAIN_TIMEOUT)
    ));
    assert_eq!(field("drain_timeout"), format!("{DEFAULT_DRAIN_TIMEOUT:?}"));
}

#[test]
fn the_bounds_on_quotas_are_the_code_s() {
    says(&format!("`MAX_LIMIT` ({MAX_LIMIT}"));
    says(&format!(
        "Periods run from {} ms to {} days.",
        MIN_PERIOD.as_millis(),
        MAX_PERIOD.as_secs() / 86_400
    ));
}
