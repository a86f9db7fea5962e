//! What `inspect` and `check` print.

use std::process::ExitCode;

use crate::describe::{self, Value};
use crate::limiter::Target;

type Outcome = Result<ExitCode, Box<dyn std::error::Error>>;

/// Prints what the store holds for `client`, for people or as JSON.
pub async fn inspect(target: &Target, client: &[u8], json: bool) -> Outcome {
    let configured = target.build(false).await?;
    if configured.memcached.is_none() {
        return Err(crate::limiter::NO_SERVERS.into());
    }
    crate::inspect::inspect(&configured, client, json).await?;
    Ok(ExitCode::SUCCESS)
}

/// Makes one decision and prints it, with the store that made it. The
/// exit status says allowed by the store (0), denied by the store (1), or
/// (2) an error or a decision the failure policy made because the store
/// failed, which is no check at all.
pub async fn check(
    target: &Target,
    client: &[u8],
    cost: u64,
    json: bool,
    embedded: bool,
) -> Outcome {
    let configured = target.build(embedded).await?;
    let decision = configured
        .limiter
        .check_n(client, cost)
        .await
        .map_err(|error| describe::error(&configured, error))?;
    let policy = configured.spec.failure_policy();
    let millis = |d: std::time::Duration| Value::Bare(d.as_millis().to_string());
    let bare = |value: &dyn ToString| Value::Bare(value.to_string());
    let mut fields = vec![
        ("allowed", bare(&decision.is_allowed())),
        ("limit", bare(&decision.limit())),
        ("remaining", bare(&decision.remaining())),
        ("reset_after_ms", millis(decision.reset_after())),
        (
            "retry_after_ms",
            decision
                .retry_after()
                .map(millis)
                .unwrap_or_else(|| Value::Bare(if json { "null" } else { "-" }.to_owned())),
        ),
        ("under_failure", bare(&decision.under_failure())),
    ];
    let failure = decision
        .under_failure()
        .then(|| describe::failure(&configured, None));
    match &failure {
        None => fields.push(("decided_by", Value::Text("store".into()))),
        Some(failure) => {
            fields.push(("decided_by", Value::Text("failure_policy".into())));
            let name = describe::policy_field(policy);
            fields.push(("failure_policy", Value::Text(name.into())));
            if json {
                fields.push(("failure", Value::Text(failure.clone())));
            }
        }
    }
    fields.extend(describe::store_fields(&configured, json));
    let line: Vec<String> = fields
        .iter()
        .map(|(name, value)| match json {
            true => format!("\"{name}\":{}", value.json()),
            false => format!("{name}={}", value.plain()),
        })
        .collect();
    match json {
        true => println!("{{{}}}", line.join(",")),
        false => println!("{}", line.join(" ")),
    }
    Ok(match failure {
        Some(failure) => {
            eprintln!(
                "memcache-ratelimit: nothing was checked: decided by the failure policy {}, not by the store: {failure}",
                describe::policy_name(policy)
            );
            ExitCode::from(2)
        }
        None if decision.is_allowed() => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    })
}
