//! What `inspect` and `check` print.

use std::process::ExitCode;

use crate::describe::{self, Value};
use crate::limiter::Target;

type Outcome = Result<ExitCode, Box<dyn std::error::Error>>;

/// Prints `client`'s keys, servers, values and estimate.
pub async fn inspect(target: &Target, client: &[u8]) -> Outcome {
    let configured = target.build(false).await?;
    let Some(memcached) = &configured.memcached else {
        return Err(crate::limiter::NO_SERVERS.into());
    };
    let seen = configured
        .limiter
        .inspect(client)
        .await
        .map_err(|error| describe::error(&configured, error))?;
    let quota = configured.limiter.quota();
    // `memcached servers=... protocol=...`: the store, then its settings.
    let store: Vec<String> = describe::store_fields(&configured, false)
        .iter()
        .map(|(name, value)| match *name {
            "store" => value.plain(),
            _ => format!("{name}={}", value.plain()),
        })
        .collect();
    println!("client    {}", String::from_utf8_lossy(client));
    println!(
        "limiter   {quota} ({:?})",
        configured.config.spec().algorithm()
    );
    println!("store     {}", store.join(" "));
    let width = seen
        .keys
        .iter()
        .map(|k| k.key.len())
        .max()
        .unwrap_or(3)
        .max(3);
    println!("{:<width$}  {:<21}  value", "key", "server");
    for key in &seen.keys {
        println!(
            "{:<width$}  {:<21}  {}",
            key.key,
            memcached.server_for(key.key.as_bytes()),
            key.value.as_deref().unwrap_or("(absent)")
        );
    }
    if let (Some(estimate), Some(remaining)) = (seen.estimate, seen.remaining) {
        let reset = seen.reset_after.unwrap_or_default().as_secs_f64();
        println!(
            "estimate  {estimate:.2} of {}, remaining {remaining}, every request counted has left the window in {reset:.1} s",
            seen.limit
        );
    }
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
    let policy = configured.config.spec().failure_policy();
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
