//! What `inspect` and `check` print.

use std::process::ExitCode;

use crate::limiter::Target;

type Outcome = Result<ExitCode, Box<dyn std::error::Error>>;

/// Prints `client`'s keys, servers, values and estimate.
pub async fn inspect(target: &Target, client: &[u8]) -> Outcome {
    let configured = target.build().await?;
    let Some(memcached) = &configured.memcached else {
        return Err(
            "inspect reads a memcached fleet: give --servers, or servers in the configuration"
                .into(),
        );
    };
    let seen = configured.limiter.inspect(client).await?;
    let quota = configured.limiter.quota_for(client);
    println!("client    {}", String::from_utf8_lossy(client));
    println!(
        "limiter   {quota} ({:?})",
        configured.config.spec().algorithm()
    );
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

/// Makes one decision and prints it; the exit status says allowed (0) or
/// denied (1).
pub async fn check(target: &Target, client: &[u8], cost: u64, json: bool) -> Outcome {
    let configured = target.build().await?;
    let decision = configured.limiter.check_n(client, cost).await?;
    let millis = |d: std::time::Duration| d.as_millis().to_string();
    let retry = decision.retry_after().map(millis);
    let fields = [
        ("allowed", decision.is_allowed().to_string()),
        ("limit", decision.limit().to_string()),
        ("remaining", decision.remaining().to_string()),
        ("reset_after_ms", millis(decision.reset_after())),
        (
            "retry_after_ms",
            retry.unwrap_or_else(|| if json { "null" } else { "-" }.to_owned()),
        ),
        ("under_failure", decision.under_failure().to_string()),
    ];
    let line: Vec<String> = fields
        .iter()
        .map(|(name, value)| match json {
            true => format!("\"{name}\":{value}"),
            false => format!("{name}={value}"),
        })
        .collect();
    match json {
        true => println!("{{{}}}", line.join(",")),
        false => println!("{}", line.join(" ")),
    }
    Ok(if decision.is_allowed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
