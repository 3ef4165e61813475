//! Where a request goes: the `--upstream` list and the choice of one upstream per request.
//!
//! An upstream is `openai`, `anthropic` or a URL, optionally bound to a path prefix
//! (`/anthropic=anthropic`). A request goes to the upstream with the longest prefix that
//! matches its path; otherwise Anthropic-shaped requests (`/v1/messages...`, or an
//! `anthropic-version` header) go to the `anthropic` upstream, other requests to the `openai`
//! one, and when neither kind is configured, to the first upstream without a prefix.

use std::fmt;

/// The provider an upstream speaks for, which decides the requests it takes by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `https://api.openai.com`.
    Openai,
    /// `https://api.anthropic.com`.
    Anthropic,
    /// Any URL (a compatible server, a local model, a test double).
    Url,
}

/// One `--upstream` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// Requests under this path prefix go here (`None`: chosen by provider).
    pub prefix: Option<String>,
    /// What it speaks for.
    pub provider: Provider,
    /// The base URL (scheme, host, port and an optional path), without a trailing slash.
    pub base: String,
}

/// Why an `--upstream` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--upstream {value:?}: {reason}")]
pub struct UpstreamError {
    /// The value given.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Upstream {
    /// Parses `[PREFIX=]openai|anthropic|URL`.
    ///
    /// ```
    /// use ctxgc_gateway::upstream::{Provider, Upstream};
    /// let u = Upstream::parse("openai").unwrap();
    /// assert_eq!((u.provider, u.base.as_str()), (Provider::Openai, "https://api.openai.com"));
    /// let u = Upstream::parse("/claude=anthropic").unwrap();
    /// assert_eq!(u.prefix.as_deref(), Some("/claude"));
    /// let u = Upstream::parse("http://127.0.0.1:9000/").unwrap();
    /// assert_eq!((u.provider, u.base.as_str()), (Provider::Url, "http://127.0.0.1:9000"));
    /// assert!(Upstream::parse("ftp://x").is_err());
    /// ```
    pub fn parse(value: &str) -> Result<Upstream, UpstreamError> {
        let fail = |reason: &str| UpstreamError {
            value: value.to_owned(),
            reason: reason.to_owned(),
        };
        let (prefix, target) = match value.split_once('=') {
            Some((prefix, target)) if prefix.starts_with('/') => {
                let prefix = prefix.trim_end_matches('/');
                if prefix.is_empty() {
                    return Err(fail("a path prefix must name a path, like /anthropic"));
                }
                (Some(prefix.to_owned()), target)
            }
            Some(_) => return Err(fail("a path prefix must start with '/' (PREFIX=TARGET)")),
            None => (None, value),
        };
        let target = target.trim();
        let (provider, base) = match target {
            "openai" => (Provider::Openai, "https://api.openai.com".to_owned()),
            "anthropic" => (Provider::Anthropic, "https://api.anthropic.com".to_owned()),
            url => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| fail(&format!("not openai, anthropic or a URL ({e})")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(fail("the URL must be http:// or https://"));
                }
                if parsed.query().is_some() || parsed.fragment().is_some() {
                    return Err(fail("the URL must not carry a query or fragment"));
                }
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    return Err(fail(
                        "the URL must not carry credentials: clients send their own",
                    ));
                }
                (Provider::Url, url.trim_end_matches('/').to_owned())
            }
        };
        Ok(Upstream {
            prefix,
            provider,
            base,
        })
    }

    /// The URL a request for `path` (and `query`) is sent to. A base path ending in `/v1`
    /// and a request path starting with `/v1/` share that segment once (so a base copied
    /// from an SDK setting works).
    ///
    /// ```
    /// use ctxgc_gateway::upstream::Upstream;
    /// let u = Upstream::parse("http://127.0.0.1:9000/v1").unwrap();
    /// assert_eq!(u.url_for("/v1/models", Some("a=1")), "http://127.0.0.1:9000/v1/models?a=1");
    /// ```
    pub fn url_for(&self, path: &str, query: Option<&str>) -> String {
        let path = match &self.prefix {
            Some(prefix) => path.strip_prefix(prefix.as_str()).unwrap_or(path),
            None => path,
        };
        let path = if self.base.ends_with("/v1") {
            path.strip_prefix("/v1")
                .filter(|p| p.starts_with('/'))
                .unwrap_or(path)
        } else {
            path
        };
        let mut url = String::with_capacity(self.base.len() + path.len() + 16);
        url.push_str(&self.base);
        if !path.starts_with('/') {
            url.push('/');
        }
        url.push_str(path);
        if let Some(q) = query {
            url.push('?');
            url.push_str(q);
        }
        url
    }

    /// The request path with this upstream's prefix removed: the path the provider sees.
    pub fn provider_path<'a>(&self, path: &'a str) -> &'a str {
        match &self.prefix {
            Some(prefix) => path.strip_prefix(prefix.as_str()).unwrap_or(path),
            None => path,
        }
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.prefix {
            Some(prefix) => write!(f, "{prefix}/* -> {}", self.base),
            None => f.write_str(&self.base),
        }
    }
}

/// The configured upstreams.
#[derive(Debug, Clone)]
pub struct Upstreams {
    list: Vec<Upstream>,
}

impl Upstreams {
    /// Checks the list: at least one, no two with the same prefix, at most one default per
    /// provider.
    pub fn new(list: Vec<Upstream>) -> Result<Upstreams, UpstreamError> {
        if list.is_empty() {
            return Err(UpstreamError {
                value: String::new(),
                reason: "at least one upstream is needed (openai, anthropic or a URL)".into(),
            });
        }
        for (i, a) in list.iter().enumerate() {
            for b in &list[..i] {
                let clash = match (&a.prefix, &b.prefix) {
                    (Some(x), Some(y)) => x == y,
                    (None, None) => a.provider == b.provider,
                    _ => false,
                };
                if clash {
                    return Err(UpstreamError {
                        value: a.to_string(),
                        reason: format!("takes the same requests as {b}"),
                    });
                }
            }
        }
        Ok(Upstreams { list })
    }

    /// Every upstream, in the order given.
    pub fn list(&self) -> &[Upstream] {
        &self.list
    }

    /// The upstream for a request.
    ///
    /// ```
    /// use ctxgc_gateway::upstream::{Provider, Upstream, Upstreams};
    /// let ups = Upstreams::new(vec![
    ///     Upstream::parse("openai").unwrap(),
    ///     Upstream::parse("anthropic").unwrap(),
    ///     Upstream::parse("/local=http://127.0.0.1:8080").unwrap(),
    /// ]).unwrap();
    /// assert_eq!(ups.route("/v1/messages", false).provider, Provider::Anthropic);
    /// assert_eq!(ups.route("/v1/chat/completions", false).provider, Provider::Openai);
    /// assert_eq!(ups.route("/local/v1/chat/completions", false).provider, Provider::Url);
    /// ```
    pub fn route(&self, path: &str, anthropic_header: bool) -> &Upstream {
        let by_prefix = self
            .list
            .iter()
            .filter(|u| {
                u.prefix.as_deref().is_some_and(|p| {
                    path == p
                        || path
                            .strip_prefix(p)
                            .is_some_and(|rest| rest.starts_with('/'))
                })
            })
            .max_by_key(|u| u.prefix.as_ref().map_or(0, String::len));
        if let Some(u) = by_prefix {
            return u;
        }
        let defaults = || self.list.iter().filter(|u| u.prefix.is_none());
        let anthropic_shaped = anthropic_header || path.starts_with("/v1/messages");
        let wanted = if anthropic_shaped {
            Provider::Anthropic
        } else {
            Provider::Openai
        };
        defaults()
            .find(|u| u.provider == wanted)
            .or_else(|| defaults().find(|u| u.provider == Provider::Url))
            .or_else(|| defaults().next())
            .unwrap_or(&self.list[0])
    }
}
