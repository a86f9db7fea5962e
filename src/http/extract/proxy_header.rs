//! Which header the proxies in front of a service write the client's
//! address in.

use ::http::HeaderName;

/// The request header that the proxies in front of a service write the
/// client's address in. [`ClientIp::behind`](super::ClientIp::behind)
/// reads exactly one: the one those proxies overwrite or append to.
///
/// Why only one: a client can send any header field it likes, and a proxy
/// only vouches for the one it writes. Behind a proxy that appends to
/// `X-Forwarded-For`, a `Forwarded` or `X-Real-IP` field in the request is
/// the client's own, passed through untouched; an extractor that also read
/// it would let each client pick the key it is counted under, a fresh one
/// per request. So the header is named by configuration, never guessed
/// from what a request carries. RFC 7239, section 8.1 ("Header Validity
/// and Integrity") gives the same warning for `Forwarded` itself: only
/// what trusted proxies wrote can be relied on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProxyHeader {
    /// `X-Forwarded-For: <client>, <proxy 1>, <proxy 2>`: each proxy
    /// appends the address it received the request from. Not a standard,
    /// but what most proxies and load balancers write.
    XForwardedFor,
    /// `Forwarded: for=<client>, for=<proxy 1>;proto=https`, the standard
    /// form: A. Petersson and M. Nilsson, *Forwarded HTTP Extension*,
    /// RFC 7239, <https://www.rfc-editor.org/rfc/rfc7239>. Only `for=` is
    /// read: quoted IPv6 with a port (`for="[2001:db8::1]:4711"`) and
    /// parameter names in any case are understood; `for=unknown` and
    /// obfuscated identifiers (`for=_hidden`) name no address.
    Forwarded,
    /// `X-Real-IP: <client>`: one address, set (replacing any the client
    /// sent) by the nearest proxy, as nginx does with
    /// `proxy_set_header X-Real-IP $remote_addr;`
    /// (<https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_set_header>),
    /// often after its realip module
    /// (<https://nginx.org/en/docs/http/ngx_http_realip_module.html>) has
    /// found the client. Several `X-Real-IP` lines name no address: the
    /// proxy did not replace the client's.
    XRealIp,
}

impl ProxyHeader {
    /// The field's name.
    pub(super) fn name(self) -> HeaderName {
        match self {
            Self::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
            Self::Forwarded => ::http::header::FORWARDED,
            Self::XRealIp => HeaderName::from_static("x-real-ip"),
        }
    }
}
