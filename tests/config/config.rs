//! Configuration from TOML and the environment: parsed once into typed
//! values, every mistake rejected at start-up with the field named, and
//! the limiter it describes working on a real memcached.

use crate::common;

use std::time::Duration;

use common::memcached::Memcached;
use common::unique_client;
use memcache_ratelimit::algorithm::Estimator;
use memcache_ratelimit::config::Config;
use memcache_ratelimit::store::Protocol;
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{Algorithm, Quota};

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn the_example_file_parses_into_typed_values() {
    let config = Config::from_toml(include_str!("../../examples/ratelimit.toml")).unwrap();
    assert_eq!(config.servers(), ["127.0.0.1:11211"]);
    assert_eq!(config.quota(), "100/minute".parse::<Quota>().unwrap());
    assert_eq!(
        config.spec().algorithm(),
        Algorithm::SlidingWindow { sub_windows: 12 }
    );
    assert_eq!(config.plan("pro"), Some("1000/minute".parse().unwrap()));
    assert_eq!(config.plans().len(), 2);
    let memcached = config.memcached();
    assert_eq!(memcached.io_timeout, Some(Duration::from_secs(1)));
    assert_eq!(memcached.max_connections, Some(64));
    assert_eq!(memcached.drain_timeout, Some(Duration::from_secs(5)));
    assert_eq!(memcached.protocol, Protocol::Meta);
}

#[test]
fn an_empty_configuration_is_every_default() {
    let config = Config::from_toml("").unwrap();
    assert!(config.servers().is_empty());
    assert_eq!(config.quota(), "100/minute".parse::<Quota>().unwrap());
    assert_eq!(config.spec().algorithm(), Algorithm::default());
    assert!(config.plans().is_empty());
}

#[test]
fn every_mistake_names_its_field() {
    let cases: &[(&str, &str)] = &[
        ("quota = \"100/fortnight\"", "quota"),
        ("quota = \"0/minute\"", "quota"),
        ("quota = 100", "quota"),
        ("qouta = \"100/minute\"", "qouta"),
        ("deadline = \"soon\"", "deadline"),
        ("deadline = \"2m\"", "deadline"),
        ("max_clock_skew = \"2h\"", "max_clock_skew"),
        ("algorithm = \"leaky\"", "algorithm"),
        ("sub_windows = 7", "sub_windows"),
        ("sub_windows = 0", "sub_windows"),
        ("algorithm = \"gcra\"\nsub_windows = 4", "sub_windows"),
        ("estimator = \"gaussian\"", "estimator"),
        ("algorithm = \"gcra\"\nestimator = \"moment\"", "estimator"),
        ("algorithm = \"gcra\"\nburst = 0", "burst"),
        ("capacity = 10", "capacity"),
        (
            "algorithm = \"discrete_refill\"\nrefill_amount = 0",
            "refill_amount",
        ),
        ("refill_amount = 3", "refill_amount"),
        (
            "algorithm = \"gcra\"\nrestart_when_empty = true",
            "restart_when_empty",
        ),
        (
            "algorithm = \"discrete_refill\"\nrestart_when_empty = \"yes\"",
            "restart_when_empty",
        ),
        (
            "algorithm = \"sessionize\"\nrefill_amount = 0",
            "refill_amount",
        ),
        (
            "algorithm = \"sessionize\"\nrestart_when_empty = true",
            "restart_when_empty",
        ),
        ("failure_policy = \"sometimes\"", "failure_policy"),
        ("failure_policy = \"fallback\"", "fallback_share"),
        (
            "failure_policy = \"fallback\"\nfallback_share = 1.5",
            "fallback_share",
        ),
        ("fallback_share = 0.5", "fallback_share"),
        ("denied_requests = \"forgiven\"", "denied_requests"),
        ("namespace = \"has space\"", "namespace"),
        ("servers = [\"localhost\"]", "servers"),
        ("servers = \"10.0.0.1:11211\"", "servers"),
        ("[memcached]\nio_timeout = \"fast\"", "memcached.io_timeout"),
        (
            "[memcached]\ndrain_timeout = \"later\"",
            "memcached.drain_timeout",
        ),
        (
            "[memcached]\nmax_connections = 0",
            "memcached.max_connections",
        ),
        ("[memcached]\npool = 3", "memcached.pool"),
        ("[memcached]\nprotocol = \"binary\"", "memcached.protocol"),
        ("[plans]\npro = \"lots\"", "plans.pro"),
        ("[plans]\n\"tab\\there\" = \"1/second\"", "plans.tab\there"),
        (
            "algorithm = \"sliding_log\"\n[plans]\nbig = \"20000/hour\"",
            "plans.big (limit)",
        ),
        ("quota = \"100/minute\"\nquota = \"5/second\"", "toml"),
        ("quota = ", "toml"),
    ];
    let mut wrong = Vec::new();
    for (text, field) in cases {
        match Config::from_toml(text) {
            Ok(_) => wrong.push(format!("{text:?} was accepted")),
            Err(error) if error.field() != *field => wrong.push(format!(
                "{text:?}: field {:?}, expected {field:?}: {error}",
                error.field()
            )),
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn syntax_errors_say_where() {
    let error = Config::from_toml("quota = \"1/second\"\nalgorithm = gcra\n").unwrap_err();
    assert!(error.to_string().contains("line 2"), "{error}");
    let error = Config::from_toml("[memcached]\npool = 3").unwrap_err();
    assert!(error.to_string().contains("pool"), "{error}");
}

#[test]
fn the_sliding_window_takes_its_estimator_from_file_or_environment() {
    assert_eq!(
        Config::from_toml("").unwrap().spec().estimator_choice(),
        Estimator::Uniform
    );
    let file = Config::from_toml("estimator = \"moment\"").unwrap();
    assert_eq!(file.spec().estimator_choice(), Estimator::Moment);
    let overridden = Config::from_toml_with_env(
        "estimator = \"moment\"",
        env(&[("MEMCACHE_RATELIMIT_ESTIMATOR", "uniform")]),
    )
    .unwrap();
    assert_eq!(overridden.spec().estimator_choice(), Estimator::Uniform);
    let wrong = Config::from_toml_with_env("", env(&[("MEMCACHE_RATELIMIT_ESTIMATOR", "mean")]))
        .unwrap_err();
    assert_eq!(
        wrong.field(),
        "estimator (from MEMCACHE_RATELIMIT_ESTIMATOR)"
    );
}

#[test]
fn the_environment_overrides_the_file_and_is_named_in_errors() {
    let text = "quota = \"10/second\"\nalgorithm = \"fixed_window\"";
    let config = Config::from_toml_with_env(
        text,
        env(&[
            ("MEMCACHE_RATELIMIT_QUOTA", "7/minute"),
            ("MEMCACHE_RATELIMIT_ALGORITHM", "gcra"),
            ("MEMCACHE_RATELIMIT_BURST", "3"),
            (
                "MEMCACHE_RATELIMIT_SERVERS",
                "10.0.0.1:11211, 10.0.0.2:11211",
            ),
            ("MEMCACHE_RATELIMIT_FAILURE_POLICY", "fallback"),
            ("MEMCACHE_RATELIMIT_FALLBACK_SHARE", "0.5"),
            ("MEMCACHE_RATELIMIT_PROTOCOL", "classic"),
            ("PATH", "/usr/bin"),
        ]),
    )
    .unwrap();
    assert_eq!(config.quota(), "7/minute".parse::<Quota>().unwrap());
    assert_eq!(
        config.spec().algorithm(),
        Algorithm::Gcra { burst: Some(3) }
    );
    assert_eq!(config.servers(), ["10.0.0.1:11211", "10.0.0.2:11211"]);
    assert_eq!(config.memcached().protocol, Protocol::Classic);

    let sessions = Config::from_toml("algorithm = \"sessionize\"\nrefill_amount = 2").unwrap();
    assert_eq!(
        sessions.spec().algorithm(),
        Algorithm::Sessionize { refill: Some(2) }
    );
    let failing = |pairs: &[(&str, &str)]| {
        Config::from_toml_with_env(text, env(pairs))
            .unwrap_err()
            .field()
            .to_owned()
    };
    assert_eq!(
        failing(&[("MEMCACHE_RATELIMIT_QUOTA", "many")]),
        "quota (from MEMCACHE_RATELIMIT_QUOTA)"
    );
    assert_eq!(
        failing(&[("MEMCACHE_RATELIMIT_SUB_WINDOWS", "four")]),
        "MEMCACHE_RATELIMIT_SUB_WINDOWS"
    );
    assert_eq!(
        failing(&[("MEMCACHE_RATELIMIT_QOUTA", "5/second")]),
        "MEMCACHE_RATELIMIT_QOUTA"
    );
    assert_eq!(
        failing(&[
            ("MEMCACHE_RATELIMIT_ALGORITHM", "sliding_window"),
            ("MEMCACHE_RATELIMIT_SUB_WINDOWS", "7")
        ]),
        "sub_windows (from MEMCACHE_RATELIMIT_SUB_WINDOWS)"
    );
}

#[tokio::test]
async fn the_discrete_refill_takes_its_amount_and_restart_from_file_or_environment() {
    let text = "quota = \"10/5s\"\nalgorithm = \"discrete_refill\"\nrefill_amount = 3";
    let config = Config::from_toml(text).unwrap();
    assert_eq!(
        config.spec().algorithm(),
        Algorithm::DiscreteRefill {
            refill: Some(3),
            restart_when_empty: false
        }
    );
    let limiter = config.limiter(config.store().await.unwrap()).unwrap();
    assert!(limiter.check_n(b"alice", 10).await.unwrap().is_allowed());
    // Above the maximum: denied, not an error.
    assert!(limiter.check_n(b"alice", 11).await.unwrap().is_denied());

    let config = Config::from_toml_with_env(
        "algorithm = \"discrete_refill\"\nrestart_when_empty = false",
        env(&[
            ("MEMCACHE_RATELIMIT_REFILL_AMOUNT", "4"),
            ("MEMCACHE_RATELIMIT_RESTART_WHEN_EMPTY", "true"),
        ]),
    )
    .unwrap();
    assert_eq!(
        config.spec().algorithm(),
        Algorithm::DiscreteRefill {
            refill: Some(4),
            restart_when_empty: true
        }
    );
    let failing = |pairs: &[(&str, &str)]| {
        Config::from_toml_with_env("algorithm = \"discrete_refill\"", env(pairs))
            .unwrap_err()
            .field()
            .to_owned()
    };
    assert_eq!(
        failing(&[("MEMCACHE_RATELIMIT_REFILL_AMOUNT", "0")]),
        "refill_amount (from MEMCACHE_RATELIMIT_REFILL_AMOUNT)"
    );
    assert_eq!(
        failing(&[("MEMCACHE_RATELIMIT_RESTART_WHEN_EMPTY", "yes")]),
        "MEMCACHE_RATELIMIT_RESTART_WHEN_EMPTY"
    );
}

#[test]
fn a_file_that_cannot_be_read_is_an_error_naming_it() {
    let error = Config::from_file("/nonexistent/ratelimit.toml").unwrap_err();
    assert_eq!(error.field(), "file");
    assert!(
        error.to_string().contains("/nonexistent/ratelimit.toml"),
        "{error}"
    );
}

#[tokio::test]
async fn the_configured_limiter_counts_in_memcached() {
    let server = Memcached::start();
    let text = format!(
        "servers = [\"{}\"]\nquota = \"3/minute\"\nalgorithm = \"sliding_window\"\nsub_windows = 6\n\
         failure_policy = \"return_error\"\ndeadline = \"5s\"\n[memcached]\nio_timeout = \"5s\"\n\
         [plans]\npro = \"5/minute\"",
        server.address()
    );
    let config = Config::from_toml(&text).unwrap();
    let store = config.store().await.unwrap();
    let client = unique_client("config");

    // Two limiters from one configuration, as two service instances: one
    // count between them.
    let first = config.limiter(store.clone()).unwrap();
    let second = config.limiter(config.store().await.unwrap()).unwrap();
    let mut allowed = 0;
    for limiter in [&first, &second, &first, &second] {
        allowed += u32::from(limiter.check(&client).await.unwrap().is_allowed());
    }
    assert_eq!(allowed, 3);

    // Plans: the configured quotas through a DynamicLimiter.
    let pro = config.plan("pro").unwrap();
    let plans = config
        .dynamic(store, move |key: &[u8]| {
            if key.starts_with(b"pro-") {
                pro
            } else {
                "3/minute".parse().unwrap()
            }
        })
        .unwrap();
    let pro_client = [b"pro-".as_slice(), &client].concat();
    let mut allowed = 0;
    for _ in 0..7 {
        allowed += u32::from(plans.check(&pro_client).await.unwrap().is_allowed());
    }
    assert_eq!(allowed, 5);
    assert_eq!(
        config.spec().algorithm(),
        Algorithm::SlidingWindow { sub_windows: 6 }
    );
}
