//! What a denied request is answered: by default a 429 whose body is an
//! RFC 9457 problem detail naming the policy and the retry time.

use std::time::Duration;

use ::http::{header, HeaderValue, Response, StatusCode};

use crate::http::headers::whole_seconds;

/// A denied request, as the [denial hook](super::RateLimitLayer::on_denied)
/// sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub(super) policy: String,
    pub(super) retry_after: Duration,
}

impl Denial {
    /// The name of the policy that denied the request.
    pub fn policy(&self) -> &str {
        &self.policy
    }

    /// How long the client should wait, rounded up to whole seconds as
    /// `Retry-After` announces it.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The default answer: `429 Too Many Requests` with an
    /// `application/problem+json` body (M. Nottingham, E. Wilde and S.
    /// Dalal, *Problem Details for HTTP APIs*, RFC 9457,
    /// <https://www.rfc-editor.org/rfc/rfc9457>) of the problem type
    /// `quota-exceeded` that R. Polli, A. Martinez and D. Miller define in
    /// *RateLimit header fields for HTTP*, draft-ietf-httpapi-ratelimit-headers-11,
    /// section 5.1 (*Quota Exceeded*), <https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/>,
    /// with its `violated-policies` member, and a `retry-after` member in
    /// seconds. The layer adds the rate-limit fields and `Retry-After`.
    ///
    /// ```
    /// use memcache_ratelimit::http::Denial;
    ///
    /// # fn show(denial: &Denial) {
    /// let response = denial.problem();
    /// assert_eq!(response.status(), 429);
    /// assert_eq!(response.headers()["content-type"], "application/problem+json");
    /// assert!(response.body().contains(r#""violated-policies":["#));
    /// # }
    /// ```
    pub fn problem(&self) -> Response<String> {
        let seconds = whole_seconds(self.retry_after);
        let body = format!(
            concat!(
                r#"{{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","#,
                r#""title":"Request cannot be satisfied as assigned quota has been exceeded","#,
                r#""status":429,"detail":"denied by the policy {name}; retry after {seconds} s","#,
                r#""violated-policies":[{quoted}],"retry-after":{seconds}}}"#
            ),
            name = json_text(&self.policy),
            quoted = json_string(&self.policy),
            seconds = seconds,
        );
        let mut response = Response::new(body);
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        response
    }
}

/// `text` as a JSON string, quotes included.
fn json_string(text: &str) -> String {
    format!("\"{}\"", json_text(text))
}

/// `text` escaped for the inside of a JSON string (RFC 8259, section 7):
/// quotes, backslashes and control characters.
fn json_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_seconds_round_up() {
        let denial = Denial {
            policy: r#"say "hi" \ bye"#.to_owned(),
            retry_after: Duration::from_millis(1_001),
        };
        let body = denial.problem().into_body();
        assert!(
            body.contains(r#""violated-policies":["say \"hi\" \\ bye"],"retry-after":2}"#),
            "{body}"
        );
        assert_eq!(json_text("a\u{1}b"), "a\\u0001b");
    }
}
