//! Every field written is parsed back with `sfv` and compared with what
//! went in.

use std::time::Duration;

use proptest::prelude::*;
use sfv::{BareItem, List, ListEntry, Parameters, Parser};

use super::*;
use crate::quota::Quota;

/// A list field's members, as (String value, parameters).
fn members(value: &str) -> Vec<(String, Parameters)> {
    let list: List = Parser::new(value).parse().unwrap();
    list.into_iter()
        .map(|entry| match entry {
            ListEntry::Item(item) => (
                item.bare_item.as_string().unwrap().as_str().to_owned(),
                item.params,
            ),
            ListEntry::InnerList(_) => panic!("an inner list in {value}"),
        })
        .collect()
}

/// A bare Integer item field, such as `Retry-After`.
fn integer_field(value: &str) -> i64 {
    let item: sfv::Item = Parser::new(value).parse().unwrap();
    assert!(item.params.is_empty(), "{value}");
    item.bare_item.as_integer().unwrap().into()
}

fn int(params: &Parameters, key: &str) -> Option<i64> {
    params
        .get(key)
        .map(|value| value.as_integer().unwrap().into())
}

fn field<'a>(fields: &'a [(&'static str, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(field, _)| *field == name)
        .map(|(_, value)| value.as_str())
}

fn secret() -> PartitionKeySecret {
    PartitionKeySecret::new(&[9; 32]).unwrap()
}

#[test]
fn names_are_printable_ascii_strings_of_at_most_64_bytes() {
    let quota: Quota = "10/1500ms".parse().unwrap();
    let longest = "x".repeat(MAX_POLICY_NAME);
    for bad in [
        "",
        "tab\t",
        "new\nline",
        "del\u{7f}",
        "caf\u{e9}",
        "\u{0}",
        &"x".repeat(MAX_POLICY_NAME + 1),
    ] {
        let error = HeaderPolicy::new(bad, quota).unwrap_err();
        assert_eq!(error.field(), "header_policy", "{bad:?}");
    }
    for good in [
        "a",
        " ",
        "1abc",
        "has space",
        r#"quote " and \ backslash"#,
        "per-user/api:v1",
        "~!@#$%^&*()_+{}|:<>?,./;'[]=-`",
        &longest,
    ] {
        let policy = HeaderPolicy::new(good, quota).unwrap();
        let fields = RateLimitFields::new(secret()).fields(&[(
            &policy,
            b"k",
            &Decision::allowed(10, 3, Duration::ZERO),
        )]);
        let policies = members(field(&fields, "RateLimit-Policy").unwrap());
        assert_eq!(policies[0].0, good);
        assert_eq!(members(field(&fields, "RateLimit").unwrap())[0].0, good);
    }
}

#[test]
fn seconds_round_up_and_a_denial_announces_its_retry_as_t() {
    let quota: Quota = "10/1500ms".parse().unwrap();
    let policy = HeaderPolicy::new("per-user/api:v1", quota).unwrap();
    let fields = RateLimitFields::new(secret());
    let allowed = Decision::allowed(10, 4, Duration::from_millis(1_001));
    assert_eq!(
        fields.fields(&[(&policy, b"k", &allowed)]),
        [
            (
                "RateLimit-Policy",
                r#""per-user/api:v1";q=10;w=2"#.to_owned()
            ),
            ("RateLimit", r#""per-user/api:v1";r=4;t=2"#.to_owned()),
        ]
    );
    // Drained in 1.4 s, allowed again in 0.2 s: t is the retry, and
    // Retry-After says the same.
    let denied = Decision::denied(
        10,
        0,
        Duration::from_millis(1_400),
        Duration::from_millis(200),
    );
    assert_eq!(
        fields.fields(&[(&policy, b"k", &denied)]),
        [
            (
                "RateLimit-Policy",
                r#""per-user/api:v1";q=10;w=2"#.to_owned()
            ),
            ("RateLimit", r#""per-user/api:v1";r=0;t=1"#.to_owned()),
            ("Retry-After", "1".to_owned()),
        ]
    );
    let now = Decision::denied(10, 0, Duration::from_millis(1), Duration::ZERO);
    let written = fields.fields(&[(&policy, b"k", &now)]);
    assert_eq!(field(&written, "Retry-After"), Some("0"));
}

#[test]
fn numbers_past_the_largest_integer_are_capped_and_never_panic() {
    let quota = Quota::per_second(std::num::NonZeroU64::MAX);
    let policy = HeaderPolicy::new("huge", quota).unwrap();
    let denied = Decision::denied(u64::MAX, u64::MAX, Duration::MAX, Duration::MAX);
    let written = RateLimitFields::new(secret())
        .legacy_headers(true)
        .fields(&[(&policy, b"k", &denied)]);
    let max = 999_999_999_999_999;
    let (_, policy_params) = &members(field(&written, "RateLimit-Policy").unwrap())[0];
    assert_eq!(int(policy_params, "q"), Some(max));
    let (_, limit_params) = &members(field(&written, "RateLimit").unwrap())[0];
    assert_eq!(int(limit_params, "r"), Some(max));
    assert_eq!(int(limit_params, "t"), Some(max));
    for name in [
        "Retry-After",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
    ] {
        assert_eq!(integer_field(field(&written, name).unwrap()), max, "{name}");
    }
}

#[test]
fn three_policies_one_response() {
    let secret = secret();
    let fields = RateLimitFields::new(secret.clone()).legacy_headers(true);
    let burst = HeaderPolicy::new("burst", "10/second".parse().unwrap())
        .unwrap()
        .per_client(true);
    let daily = HeaderPolicy::new("daily", "1000/day".parse().unwrap())
        .unwrap()
        .per_client(true);
    let bytes = HeaderPolicy::new("upload bytes", "1000000/hour".parse().unwrap())
        .unwrap()
        .quota_unit(QuotaUnit::ContentBytes);
    let short = Decision::denied(
        10,
        0,
        Duration::from_millis(900),
        Duration::from_millis(300),
    );
    let long = Decision::denied(1000, 2, Duration::from_secs(50_000), Duration::from_secs(7));
    let plenty = Decision::allowed(1_000_000, 999_000, Duration::from_millis(3_599_500));
    let written = fields.fields(&[
        (&burst, b"192.0.2.1", &short),
        (&daily, b"tenant-7", &long),
        (&bytes, b"", &plenty),
    ]);
    for (name, value) in &written {
        println!("{name}: {value}");
    }
    let policies = members(field(&written, "RateLimit-Policy").unwrap());
    let limits = members(field(&written, "RateLimit").unwrap());
    let names: Vec<&str> = policies.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["burst", "daily", "upload bytes"]);
    let pk = |params: &Parameters| {
        params
            .get("pk")
            .map(|pk| pk.as_byte_sequence().unwrap().to_vec())
    };
    assert_eq!(
        pk(&policies[0].1),
        Some(secret.partition_key(b"192.0.2.1").to_vec())
    );
    assert_eq!(
        pk(&limits[1].1),
        Some(secret.partition_key(b"tenant-7").to_vec())
    );
    assert_eq!(pk(&policies[2].1), None);
    assert_eq!(
        policies[2].1.get("qu"),
        Some(&BareItem::String(
            sfv::String::from_string("content-bytes".into()).unwrap()
        ))
    );
    // Each denial's t is its retry; Retry-After is the longest of them;
    // the policy that allowed keeps the time until its usage drains.
    let t: Vec<Option<i64>> = limits.iter().map(|(_, params)| int(params, "t")).collect();
    assert_eq!(t, [Some(1), Some(7), Some(3600)]);
    assert_eq!(integer_field(field(&written, "Retry-After").unwrap()), 7);
    // The legacy fields describe the denial with the longest retry.
    assert_eq!(field(&written, "X-RateLimit-Limit"), Some("1000"));
    assert_eq!(field(&written, "X-RateLimit-Remaining"), Some("2"));
    assert_eq!(field(&written, "X-RateLimit-Reset"), Some("50000"));

    // All allowed: no Retry-After, and the legacy fields describe the
    // policy with the least left.
    let some = Decision::allowed(10, 9, Duration::from_millis(100));
    let few = Decision::allowed(1000, 3, Duration::from_secs(40_000));
    let written = fields.fields(&[
        (&burst, b"192.0.2.1", &some),
        (&daily, b"tenant-7", &few),
        (&bytes, b"", &plenty),
    ]);
    assert_eq!(field(&written, "Retry-After"), None);
    assert_eq!(field(&written, "X-RateLimit-Remaining"), Some("3"));
    assert_eq!(field(&written, "X-RateLimit-Reset"), Some("40000"));
}

/// A policy name: printable ASCII, 1 to 64 bytes.
fn name() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ -~]{1,64}").unwrap()
}

fn unit() -> impl Strategy<Value = QuotaUnit> {
    prop_oneof![
        Just(QuotaUnit::Requests),
        Just(QuotaUnit::ContentBytes),
        Just(QuotaUnit::ConcurrentRequests),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (0u64..10_000_000_000).prop_map(Duration::from_millis),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(secs, nanos)| Duration::new(secs, nanos)),
    ]
}

/// One policy and its decision, with everything arbitrary.
#[derive(Debug, Clone)]
struct Case {
    name: String,
    limit: u64,
    period_ms: u64,
    unit: QuotaUnit,
    per_client: bool,
    key: Vec<u8>,
    remaining: u64,
    reset: Duration,
    retry: Option<Duration>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        name(),
        1..=u64::MAX,
        1u64..=crate::quota::MAX_PERIOD.as_millis() as u64,
        unit(),
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..40),
        any::<u64>(),
        duration(),
        proptest::option::of(duration()),
    )
        .prop_map(
            |(name, limit, period_ms, unit, per_client, key, remaining, reset, retry)| Case {
                name,
                limit,
                period_ms,
                unit,
                per_client,
                key,
                remaining,
                reset,
                retry,
            },
        )
}

fn capped(n: u64) -> i64 {
    n.min(999_999_999_999_999) as i64
}

proptest! {
    #[test]
    fn any_string_is_a_name_exactly_when_it_is_printable_ascii(
        name in prop_oneof![any::<String>(), "[ -~]{0,70}", "[\\x00-\\x7f]{0,70}"],
    ) {
        let valid = (1..=MAX_POLICY_NAME).contains(&name.len())
            && name.bytes().all(|byte| (0x20..=0x7e).contains(&byte));
        let quota: Quota = "1/second".parse().unwrap();
        prop_assert_eq!(HeaderPolicy::new(&name, quota).is_ok(), valid);
    }

    #[test]
    fn every_field_parses_back_to_what_went_in(
        cases in proptest::collection::vec(case(), 0..5),
        legacy in any::<bool>(),
    ) {
        let secret = secret();
        let policies: Vec<HeaderPolicy> = cases
            .iter()
            .map(|case| {
                let quota = Quota::with_period(
                    std::num::NonZeroU64::new(case.limit).unwrap(),
                    Duration::from_millis(case.period_ms),
                )
                .unwrap();
                HeaderPolicy::new(&case.name, quota)
                    .unwrap()
                    .quota_unit(case.unit)
                    .per_client(case.per_client)
            })
            .collect();
        let decisions: Vec<Decision> = cases
            .iter()
            .map(|case| match case.retry {
                Some(retry) => Decision::denied(case.limit, case.remaining, case.reset, retry),
                None => Decision::allowed(case.limit, case.remaining, case.reset),
            })
            .collect();
        let entries: Vec<PolicyDecision<'_>> = cases
            .iter()
            .zip(&policies)
            .zip(&decisions)
            .map(|((case, policy), decision)| (policy, case.key.as_slice(), decision))
            .collect();
        let written = RateLimitFields::new(secret.clone())
            .legacy_headers(legacy)
            .fields(&entries);
        // The layer copies the values at once and cuts them: they follow
        // one another from the buffer's start, with nothing between.
        let mut out = FieldBuf::new();
        let ranges = RateLimitFields::new(secret.clone())
            .legacy_headers(legacy)
            .write_announcing(&mut out, &entries, &[]);
        let mut end = 0;
        for (_, range) in &ranges {
            prop_assert_eq!(range.start, end);
            end = range.end;
        }
        prop_assert_eq!(end, out.len());
        prop_assert_eq!(ranges.len(), written.len());
        if cases.is_empty() {
            prop_assert!(written.is_empty());
            return Ok(());
        }
        for (_, value) in &written {
            // Every value is a valid field value for the http crate too.
            prop_assert!(value.bytes().all(|byte| (0x20..=0x7e).contains(&byte)));
        }
        let policy_members = members(field(&written, "RateLimit-Policy").unwrap());
        let limit_members = members(field(&written, "RateLimit").unwrap());
        prop_assert_eq!(policy_members.len(), cases.len());
        prop_assert_eq!(limit_members.len(), cases.len());
        let mut longest_retry = None;
        for (case, ((name, policy), (limit_name, limit))) in
            cases.iter().zip(policy_members.iter().zip(&limit_members))
        {
            prop_assert_eq!(name, &case.name);
            prop_assert_eq!(limit_name, &case.name);
            prop_assert_eq!(int(policy, "q"), Some(capped(case.limit)));
            prop_assert_eq!(int(policy, "w"), Some(case.period_ms.div_ceil(1000) as i64));
            let qu = policy.get("qu").map(|qu| qu.as_string().unwrap().as_str().to_owned());
            let expected_qu = (case.unit != QuotaUnit::Requests).then(|| case.unit.as_str().to_owned());
            prop_assert_eq!(qu, expected_qu);
            prop_assert_eq!(int(limit, "r"), Some(capped(case.remaining)));
            let t = capped(whole_seconds(case.retry.unwrap_or(case.reset)));
            prop_assert_eq!(int(limit, "t"), Some(t));
            if case.retry.is_some() {
                longest_retry = longest_retry.max(Some(t));
            }
            let pk = case.per_client.then(|| secret.partition_key(&case.key).to_vec());
            for params in [policy, limit] {
                let written_pk = params.get("pk").map(|pk| pk.as_byte_sequence().unwrap().to_vec());
                prop_assert_eq!(&written_pk, &pk);
            }
            prop_assert!(params_names(policy).iter().all(|key| ["q", "qu", "w", "pk"].contains(key)));
            prop_assert!(params_names(limit).iter().all(|key| ["r", "t", "pk"].contains(key)));
        }
        let retry_after = field(&written, "Retry-After").map(integer_field);
        prop_assert_eq!(retry_after, longest_retry);
        for name in ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"] {
            let value = field(&written, name);
            prop_assert_eq!(value.is_some(), legacy);
            if let Some(value) = value {
                prop_assert!(integer_field(value) >= 0);
            }
        }
    }
}

fn params_names(params: &Parameters) -> Vec<&str> {
    params.keys().map(|key| key.as_str()).collect()
}
