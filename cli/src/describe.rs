//! Words for what decided: the store (memcached or embedded), the failure
//! policy, and the server that failed.

use std::time::Duration;

use memcache_ratelimit::{Error, FailurePolicy};

use crate::limiter::Configured;

/// One printed field's value.
pub enum Value {
    /// A number, boolean or `null`: the same in both forms.
    Bare(String),
    /// Text: quoted in JSON.
    Text(String),
    /// A list: comma separated, or a JSON array.
    List(Vec<String>),
}

impl Value {
    /// The value in the `key=value` form.
    pub fn plain(&self) -> String {
        match self {
            Value::Bare(value) | Value::Text(value) => value.clone(),
            Value::List(items) => items.join(","),
        }
    }

    /// The value in the JSON form.
    pub fn json(&self) -> String {
        match self {
            Value::Bare(value) => value.clone(),
            Value::Text(value) => json_string(value),
            Value::List(items) => {
                let items: Vec<String> = items.iter().map(|item| json_string(item)).collect();
                format!("[{}]", items.join(","))
            }
        }
    }
}

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if u32::from(c) < 0x20 => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// The fields naming the store: `store=memcached servers=... protocol=...`,
/// or the embedded store, said to be unshared.
pub fn store_fields(configured: &Configured, json: bool) -> Vec<(&'static str, Value)> {
    match &configured.memcached {
        Some(store) => vec![
            ("store", Value::Text("memcached".into())),
            ("servers", Value::List(store.servers().to_vec())),
            (
                "protocol",
                Value::Text(format!("{:?}", store.protocol()).to_lowercase()),
            ),
        ],
        None if json => vec![
            ("store", Value::Text("embedded".into())),
            ("shared", Value::Bare("false".into())),
        ],
        None => vec![(
            "store",
            Value::Text("embedded (in-process, not shared)".into()),
        )],
    }
}

/// The failure policy as configured, with what it decides.
pub fn policy_name(policy: FailurePolicy) -> String {
    match policy {
        FailurePolicy::Open => "open (allow)".into(),
        FailurePolicy::Closed => "closed (deny)".into(),
        FailurePolicy::Fallback { share } => {
            format!("fallback (an in-process stand-in with a {share} share of the quota)")
        }
        FailurePolicy::ReturnError => "return_error".into(),
    }
}

/// The policy's configured name alone, for the `failure_policy` field.
pub fn policy_field(policy: FailurePolicy) -> &'static str {
    match policy {
        FailurePolicy::Open => "open",
        FailurePolicy::Closed => "closed",
        FailurePolicy::Fallback { .. } => "fallback",
        FailurePolicy::ReturnError => "return_error",
    }
}

/// The server the last call went to: the one holding the client's keys.
fn server(configured: &Configured, key: Option<&[u8]>) -> String {
    match (&configured.memcached, key) {
        (Some(store), Some(key)) if !key.is_empty() => {
            format!("memcached {}", store.server_for(key))
        }
        (Some(store), _) => format!("memcached {}", store.servers().join(",")),
        (None, _) => "the embedded store".into(),
    }
}

/// What failed, with the server named: the store's last error, or the
/// call still waiting when the `deadline` passed.
pub fn failure(configured: &Configured, deadline: Option<Duration>) -> String {
    let seen = configured.watched.seen();
    match &seen.failure {
        Some((key, error)) => {
            let unknown = if error.is_ambiguous() {
                " (the request may have been counted)"
            } else {
                ""
            };
            format!(
                "{} failed: {}{unknown}",
                server(configured, Some(key)),
                error.message()
            )
        }
        None => format!(
            "{} did not answer within the {}deadline",
            server(configured, seen.last_key.as_deref()),
            deadline.map_or(String::new(), |d| format!("{d:?} "))
        ),
    }
}

/// `error` as the operator reads it: a store failure names the server.
pub fn error(configured: &Configured, error: Error) -> Box<dyn std::error::Error> {
    match error {
        Error::Store(_) => failure(configured, None).into(),
        Error::DeadlineExceeded(deadline) => failure(configured, Some(deadline)).into(),
        other => other.into(),
    }
}
