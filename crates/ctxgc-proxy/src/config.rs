//! The upstream servers the proxy stands in front of: the `mcpServers` JSON that Claude
//! Desktop, Claude Code and Cursor use, or one server given on the command line.
//!
//! `${VAR}` (and `${VAR:-default}`) in `command`, `args`, `env`, `url` and `headers` is read
//! from the environment when the proxy starts, so keys stay out of the file. A variable that
//! is not set is an error naming the server, the field and the variable. Every value that came
//! from a variable, and every `env` and `headers` value, is a credential: it is kept in
//! [`ServerSet::secrets`] so that nothing the agent receives can carry it.

use std::path::PathBuf;

use serde_json::Value;

/// How the proxy reaches one upstream server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// A local server started as a child process, spoken to over its stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the proxy's own environment for the child.
        env: Vec<(String, String)>,
        /// Working directory of the child, when given.
        cwd: Option<PathBuf>,
    },
    /// A server reached over streamable HTTP.
    Http {
        /// The endpoint, e.g. `https://billing.example/mcp`.
        url: String,
        /// Headers sent with every request (credentials, usually).
        headers: Vec<(String, String)>,
    },
}

/// One upstream server: its name (as in `mcpServers`) and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The key of the server in `mcpServers`; used as the prefix of its tool names when two
    /// servers share a tool name.
    pub name: String,
    /// How to reach it.
    pub transport: UpstreamTransport,
}

/// The servers to proxy, in file order, and the credentials they carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSet {
    /// The servers, in the order of the file.
    pub servers: Vec<ServerSpec>,
    /// Values that must never reach the agent (header and env values, expanded variables).
    pub secrets: Vec<String>,
    /// Things in the file that were accepted but not used, each naming server and field.
    pub notes: Vec<String>,
}

/// What is wrong with a server configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file is not JSON.
    #[error("{path}: not valid JSON: {message}")]
    Json {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// The file cannot be read.
    #[error("{path}: cannot read: {message}")]
    Read {
        /// The file.
        path: String,
        /// The system's message.
        message: String,
    },
    /// A field is missing, of the wrong type, or has an unusable value.
    #[error("server \"{server}\": field \"{field}\": {message}")]
    Field {
        /// The server's name (`mcpServers` key), or `(file)` for the top level.
        server: String,
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// `${VAR}` names a variable that is not set.
    #[error(
        "server \"{server}\": field \"{field}\": environment variable {variable} is not set (set it, or write ${{{variable}:-default}})"
    )]
    MissingVariable {
        /// The server's name.
        server: String,
        /// The field holding `${VAR}`.
        field: String,
        /// The variable.
        variable: String,
    },
    /// No server to proxy.
    #[error("no upstream server: give --servers FILE, --upstream-cmd CMD or --upstream-url URL")]
    NoServer,
}

/// Words that mark an environment variable as a credential when they are one of the
/// `_`-separated parts of its name (`OPENAI_API_KEY`, `GITHUB_TOKEN`, `PGPASSWORD`...).
const CREDENTIAL_WORDS: &[&str] = &[
    "KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "PAT",
];

/// Whether an environment variable's name says it holds a credential.
///
/// ```
/// use ctxgc_proxy::config::looks_like_credential;
/// for name in ["OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "HF_TOKEN", "DB_PASSWD"] {
///     assert!(looks_like_credential(name), "{name}");
/// }
/// for name in ["PATH", "HOME", "KEYBOARD_LAYOUT", "TOKENIZERS_PARALLELISM", "PWD", "SSH_AUTH_SOCK"] {
///     assert!(!looks_like_credential(name), "{name}");
/// }
/// ```
pub fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("PASSWORD")
        || upper.ends_with("APIKEY")
        || upper
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|part| CREDENTIAL_WORDS.contains(&part))
}

/// The password of a URL's user information (`scheme://user:PASSWORD@host`), if any.
fn url_password(value: &str) -> Option<&str> {
    let rest = &value[value.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then_some(password)
}

impl ServerSet {
    /// Adds the credentials of the environment a stdio upstream inherits from the proxy:
    /// variables whose name looks like a credential ([`looks_like_credential`]), those named
    /// in `named` (`--secret-env NAME`), and passwords inside URLs of any variable. A name in
    /// `named` that is not set is noted.
    ///
    /// ```
    /// use ctxgc_proxy::config::ServerSet;
    /// let mut set = ServerSet::default();
    /// set.add_inherited_env(
    ///     [("OPENAI_API_KEY".to_string(), "sk-abc123456".to_string()),
    ///      ("MY_SETTING".to_string(), "plain-value-9".to_string()),
    ///      ("DATABASE_URL".to_string(), "postgres://app:db-pass-77@db/x".to_string()),
    ///      ("HOME".to_string(), "/home/me".to_string())],
    ///     &["MY_SETTING".to_string(), "NOT_SET".to_string()],
    /// );
    /// assert!(set.secrets.contains(&"sk-abc123456".to_string()));
    /// assert!(set.secrets.contains(&"plain-value-9".to_string()));
    /// assert!(set.secrets.contains(&"db-pass-77".to_string()));
    /// assert!(!set.secrets.contains(&"/home/me".to_string()));
    /// assert!(set.notes.iter().any(|n| n.contains("NOT_SET")));
    /// ```
    pub fn add_inherited_env(
        &mut self,
        vars: impl IntoIterator<Item = (String, String)>,
        named: &[String],
    ) {
        let mut seen = std::collections::BTreeSet::new();
        for (name, value) in vars {
            let wanted = named.iter().any(|n| n == &name);
            if wanted {
                seen.insert(name.clone());
            }
            if value.trim().is_empty() {
                continue;
            }
            if wanted || looks_like_credential(&name) {
                self.secrets.push(value.clone());
            }
            if let Some(password) = url_password(&value) {
                self.secrets.push(password.to_owned());
            }
        }
        for name in named {
            if !seen.contains(name) {
                self.notes.push(format!(
                    "--secret-env {name}: the variable is not set, so there is nothing to hide"
                ));
            }
        }
        self.secrets.sort();
        self.secrets.dedup();
    }
}

/// Reads an `mcpServers` file, expanding `${VAR}` with `lookup`.
///
/// ```
/// use ctxgc_proxy::config::{parse_servers, UpstreamTransport};
/// let json = r#"{"mcpServers": {"billing": {"url": "https://b.example/mcp",
///     "headers": {"Authorization": "Bearer ${BILLING_TOKEN}"}}}}"#;
/// let set = parse_servers(json, "mcp.json", &|v: &str| (v == "BILLING_TOKEN").then(|| "s3cret-token".to_string())).unwrap();
/// assert_eq!(set.servers[0].name, "billing");
/// assert!(matches!(&set.servers[0].transport, UpstreamTransport::Http { headers, .. }
///     if headers[0].1 == "Bearer s3cret-token"));
/// assert!(set.secrets.contains(&"s3cret-token".to_string()));
///
/// let err = parse_servers(json, "mcp.json", &|_: &str| None).unwrap_err();
/// assert_eq!(err.to_string(), "server \"billing\": field \"headers.Authorization\": environment \
///     variable BILLING_TOKEN is not set (set it, or write ${BILLING_TOKEN:-default})");
/// ```
pub fn parse_servers(
    text: &str,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerSet, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let top = value.as_object().ok_or_else(|| ConfigError::Field {
        server: "(file)".into(),
        field: "mcpServers".into(),
        message: "the file must be a JSON object with an \"mcpServers\" object".into(),
    })?;
    let servers = top
        .get("mcpServers")
        .ok_or_else(|| ConfigError::Field {
            server: "(file)".into(),
            field: "mcpServers".into(),
            message: "missing: the file must hold {\"mcpServers\": {NAME: {...}}}".into(),
        })?
        .as_object()
        .ok_or_else(|| ConfigError::Field {
            server: "(file)".into(),
            field: "mcpServers".into(),
            message: "expected an object of servers by name".into(),
        })?;
    let mut set = ServerSet::default();
    for (name, entry) in servers {
        let mut expander = Expander {
            server: name,
            lookup,
            secrets: &mut set.secrets,
        };
        if let Some(spec) = parse_entry(name, entry, &mut expander, &mut set.notes)? {
            set.servers.push(spec);
        }
    }
    if set.servers.is_empty() {
        return Err(ConfigError::NoServer);
    }
    check_names(&set.servers)?;
    set.secrets.sort();
    set.secrets.dedup();
    Ok(set)
}

/// Reads and parses an `mcpServers` file with the process environment.
pub fn load_servers(path: &std::path::Path) -> Result<ServerSet, ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    parse_servers(&text, &shown, &|name| std::env::var(name).ok())
}

/// One stdio server from a command line such as `"python -m my_server --flag"` (shell-style
/// quoting), with `${VAR}` expanded.
///
/// ```
/// use ctxgc_proxy::config::{single_command, UpstreamTransport};
/// let set = single_command("upstream", "python -m 'my server'", &|_: &str| None).unwrap();
/// assert!(matches!(&set.servers[0].transport, UpstreamTransport::Stdio { command, args, .. }
///     if command == "python" && args == &["-m", "my server"]));
/// ```
pub fn single_command(
    name: &str,
    command_line: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerSet, ConfigError> {
    let mut set = ServerSet::default();
    let words = shlex::split(command_line).ok_or_else(|| ConfigError::Field {
        server: name.to_owned(),
        field: "--upstream-cmd".into(),
        message: "unbalanced quotes".into(),
    })?;
    let mut expander = Expander {
        server: name,
        lookup,
        secrets: &mut set.secrets,
    };
    let mut expanded = Vec::with_capacity(words.len());
    for word in &words {
        expanded.push(expander.expand(word, "--upstream-cmd", false)?);
    }
    let mut words = expanded.into_iter();
    let command = words.next().ok_or_else(|| ConfigError::Field {
        server: name.to_owned(),
        field: "--upstream-cmd".into(),
        message: "empty command".into(),
    })?;
    set.servers.push(ServerSpec {
        name: name.to_owned(),
        transport: UpstreamTransport::Stdio {
            command,
            args: words.collect(),
            env: Vec::new(),
            cwd: None,
        },
    });
    Ok(set)
}

/// One streamable-HTTP server from `--upstream-url` and `--header NAME=VALUE` pairs.
pub fn single_url(
    name: &str,
    url: &str,
    headers: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerSet, ConfigError> {
    let mut set = ServerSet::default();
    let mut expander = Expander {
        server: name,
        lookup,
        secrets: &mut set.secrets,
    };
    let url = expander.expand(url, "--upstream-url", false)?;
    check_url(name, "--upstream-url", &url)?;
    let mut pairs = Vec::new();
    for header in headers {
        let (key, value) = header
            .split_once('=')
            .or_else(|| header.split_once(':'))
            .ok_or_else(|| ConfigError::Field {
                server: name.to_owned(),
                field: "--header".into(),
                message: format!("expected NAME=VALUE, found {:?}", redact_hint(header)),
            })?;
        let key = key.trim().to_owned();
        let value = expander.expand(value.trim(), "--header", true)?;
        check_header(name, &format!("headers.{key}"), &key, &value)?;
        pairs.push((key, value));
    }
    set.servers.push(ServerSpec {
        name: name.to_owned(),
        transport: UpstreamTransport::Http {
            url,
            headers: pairs,
        },
    });
    set.secrets.sort();
    set.secrets.dedup();
    Ok(set)
}

/// Shows the shape of a malformed header without its value, which may be a credential.
fn redact_hint(header: &str) -> String {
    let shown: String = header.chars().take(12).collect();
    if header.chars().count() > 12 {
        format!("{shown}…")
    } else {
        shown
    }
}

struct Expander<'a> {
    server: &'a str,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    secrets: &'a mut Vec<String>,
}

impl Expander<'_> {
    /// Expands `${VAR}` and `${VAR:-default}` in `text`. Every substituted value is a secret;
    /// so is the whole result when `secret` is set.
    fn expand(&mut self, text: &str, field: &str, secret: bool) -> Result<String, ConfigError> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').ok_or_else(|| ConfigError::Field {
                server: self.server.to_owned(),
                field: field.to_owned(),
                message: "\"${\" without a closing \"}\"".into(),
            })?;
            let inner = &after[..end];
            let (variable, default) = match inner.split_once(":-") {
                Some((v, d)) => (v, Some(d)),
                None => (inner, None),
            };
            if variable.is_empty()
                || !variable
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(ConfigError::Field {
                    server: self.server.to_owned(),
                    field: field.to_owned(),
                    message: format!("\"${{{inner}}}\" is not a variable name"),
                });
            }
            let value = match ((self.lookup)(variable), default) {
                (Some(v), _) => v,
                (None, Some(d)) => d.to_owned(),
                (None, None) => {
                    return Err(ConfigError::MissingVariable {
                        server: self.server.to_owned(),
                        field: field.to_owned(),
                        variable: variable.to_owned(),
                    });
                }
            };
            if !value.is_empty() {
                self.secrets.push(value.clone());
            }
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        if secret && !out.is_empty() {
            self.secrets.push(out.clone());
            // "Bearer XYZ": the token alone is the secret as well.
            if let Some((_, token)) = out.split_once(' ')
                && !token.trim().is_empty()
            {
                self.secrets.push(token.trim().to_owned());
            }
        }
        Ok(out)
    }
}

fn field_error(server: &str, field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        server: server.to_owned(),
        field: field.to_owned(),
        message: message.into(),
    }
}

fn string_field(server: &str, field: &str, value: &Value) -> Result<String, ConfigError> {
    value.as_str().map(str::to_owned).ok_or_else(|| {
        field_error(
            server,
            field,
            format!("expected a string, found {}", kind_of(value)),
        )
    })
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn string_map(
    server: &str,
    field: &str,
    value: &Value,
    expander: &mut Expander<'_>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let map = value.as_object().ok_or_else(|| {
        field_error(
            server,
            field,
            format!("expected an object of strings, found {}", kind_of(value)),
        )
    })?;
    let mut out = Vec::with_capacity(map.len());
    for (key, v) in map {
        let sub = format!("{field}.{key}");
        let text = string_field(server, &sub, v)?;
        out.push((key.clone(), expander.expand(&text, &sub, true)?));
    }
    Ok(out)
}

fn parse_entry(
    name: &str,
    entry: &Value,
    expander: &mut Expander<'_>,
    notes: &mut Vec<String>,
) -> Result<Option<ServerSpec>, ConfigError> {
    let object = entry.as_object().ok_or_else(|| {
        field_error(
            name,
            "(server)",
            format!("expected an object, found {}", kind_of(entry)),
        )
    })?;
    if object.get("disabled").and_then(Value::as_bool) == Some(true) {
        notes.push(format!(
            "server \"{name}\": \"disabled\": true, not started"
        ));
        return Ok(None);
    }
    let kind = match object.get("type") {
        None => None,
        Some(v) => Some(string_field(name, "type", v)?),
    };
    const KNOWN: &[&str] = &[
        "command", "args", "env", "cwd", "url", "headers", "type", "disabled",
    ];
    for key in object.keys() {
        if !KNOWN.contains(&key.as_str()) {
            notes.push(format!(
                "server \"{name}\": field \"{key}\" is not used by the proxy"
            ));
        }
    }
    let has_command = object.contains_key("command");
    let has_url = object.contains_key("url");
    let transport = match (kind.as_deref(), has_command, has_url) {
        (Some("sse"), _, _) => {
            return Err(field_error(
                name,
                "type",
                "the legacy SSE transport is not supported; use the server's streamable HTTP endpoint",
            ));
        }
        (_, true, true) => {
            return Err(field_error(
                name,
                "command",
                "give either \"command\" or \"url\", not both",
            ));
        }
        (Some("stdio") | None, true, false) => {
            let command = expander.expand(
                &string_field(name, "command", &object["command"])?,
                "command",
                false,
            )?;
            if command.trim().is_empty() {
                return Err(field_error(name, "command", "empty"));
            }
            let mut args = Vec::new();
            if let Some(value) = object.get("args") {
                let list = value.as_array().ok_or_else(|| {
                    field_error(
                        name,
                        "args",
                        format!("expected an array of strings, found {}", kind_of(value)),
                    )
                })?;
                for (i, arg) in list.iter().enumerate() {
                    let field = format!("args[{i}]");
                    args.push(expander.expand(&string_field(name, &field, arg)?, &field, false)?);
                }
            }
            let env = match object.get("env") {
                Some(v) => string_map(name, "env", v, expander)?,
                None => Vec::new(),
            };
            let cwd = match object.get("cwd") {
                Some(v) => Some(PathBuf::from(expander.expand(
                    &string_field(name, "cwd", v)?,
                    "cwd",
                    false,
                )?)),
                None => None,
            };
            UpstreamTransport::Stdio {
                command,
                args,
                env,
                cwd,
            }
        }
        (Some("http" | "streamable-http" | "streamableHttp") | None, false, true) => {
            let url = expander.expand(&string_field(name, "url", &object["url"])?, "url", false)?;
            check_url(name, "url", &url)?;
            let headers = match object.get("headers") {
                Some(v) => string_map(name, "headers", v, expander)?,
                None => Vec::new(),
            };
            for (key, value) in &headers {
                check_header(name, &format!("headers.{key}"), key, value)?;
            }
            UpstreamTransport::Http { url, headers }
        }
        (Some(other), _, _)
            if !matches!(
                other,
                "stdio" | "http" | "streamable-http" | "streamableHttp"
            ) =>
        {
            return Err(field_error(
                name,
                "type",
                format!("unknown transport {other:?} (expected \"stdio\" or \"http\")"),
            ));
        }
        (Some(kind), _, _) => {
            let needed = if kind == "stdio" { "command" } else { "url" };
            return Err(field_error(
                name,
                needed,
                format!("missing (type is {kind:?})"),
            ));
        }
        (None, false, false) => {
            return Err(field_error(
                name,
                "command",
                "missing: a server needs \"command\" (stdio) or \"url\" (streamable HTTP)",
            ));
        }
    };
    Ok(Some(ServerSpec {
        name: name.to_owned(),
        transport,
    }))
}

fn check_url(server: &str, field: &str, url: &str) -> Result<(), ConfigError> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(field_error(
            server,
            field,
            "expected an http:// or https:// URL",
        ));
    }
    Ok(())
}

fn check_header(server: &str, field: &str, key: &str, value: &str) -> Result<(), ConfigError> {
    if axum::http::HeaderName::from_bytes(key.as_bytes()).is_err() {
        return Err(field_error(server, field, "not a valid header name"));
    }
    if axum::http::HeaderValue::from_str(value).is_err() {
        // The value is a credential: say what is wrong without showing it.
        return Err(field_error(
            server,
            field,
            "the value is not a valid header value (control characters or non-ASCII)",
        ));
    }
    Ok(())
}

fn check_names(servers: &[ServerSpec]) -> Result<(), ConfigError> {
    for spec in servers {
        if spec.name.is_empty() {
            return Err(field_error("", "(name)", "a server name must not be empty"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "CODE_KEY" => Some("code-key-123456".into()),
            "TOKEN" => Some("tok-abcdef".into()),
            _ => None,
        }
    }

    #[test]
    fn reads_stdio_and_http_servers_in_file_order() {
        let json = r#"{"mcpServers": {
            "zeta": {"command": "python", "args": ["-m", "srv", "--key=${CODE_KEY}"], "env": {"API_KEY": "${CODE_KEY}"}},
            "alpha": {"url": "https://a.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}}}"#;
        let set = parse_servers(json, "mcp.json", &env).unwrap();
        assert_eq!(set.servers.len(), 2);
        assert_eq!(set.servers[0].name, "zeta");
        assert_eq!(
            set.servers[0].transport,
            UpstreamTransport::Stdio {
                command: "python".into(),
                args: vec!["-m".into(), "srv".into(), "--key=code-key-123456".into()],
                env: vec![("API_KEY".into(), "code-key-123456".into())],
                cwd: None,
            }
        );
        assert_eq!(set.servers[1].name, "alpha");
        assert!(set.secrets.contains(&"code-key-123456".to_string()));
        assert!(set.secrets.contains(&"tok-abcdef".to_string()));
        assert!(set.secrets.contains(&"Bearer tok-abcdef".to_string()));
    }

    #[test]
    fn missing_variable_names_server_field_and_variable() {
        let json = r#"{"mcpServers": {"code": {"command": "x", "env": {"API_KEY": "${NOPE}"}}}}"#;
        let err = parse_servers(json, "mcp.json", &env).unwrap_err();
        assert_eq!(
            err,
            ConfigError::MissingVariable {
                server: "code".into(),
                field: "env.API_KEY".into(),
                variable: "NOPE".into()
            }
        );
        let json = r#"{"mcpServers": {"code": {"command": "x", "args": ["${A:-fallback}"]}}}"#;
        let set = parse_servers(json, "mcp.json", &env).unwrap();
        assert!(
            matches!(&set.servers[0].transport, UpstreamTransport::Stdio { args, .. } if args == &["fallback"])
        );
    }

    #[test]
    fn bad_input_gets_errors_naming_server_and_field() {
        let cases = [
            ("[]", "mcpServers"),
            (r#"{"servers": {}}"#, "mcpServers"),
            (
                r#"{"mcpServers": {"a": {"command": 3}}}"#,
                "field \"command\": expected a string, found a number",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "args": "y"}}}"#,
                "field \"args\"",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "args": ["y", 2]}}}"#,
                "field \"args[1]\"",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "ftp://x"}}}"#,
                "field \"url\"",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "http://x", "headers": {"A": 1}}}}"#,
                "field \"headers.A\"",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}"#,
                "legacy SSE",
            ),
            (
                r#"{"mcpServers": {"a": {}}}"#,
                "server \"a\": field \"command\": missing",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "url": "http://x"}}}"#,
                "not both",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "${unclosed"}}}"#,
                "closing",
            ),
            (r#"{"mcpServers": {}}"#, "no upstream server"),
            ("{not json", "not valid JSON"),
        ];
        for (json, expected) in cases {
            let err = parse_servers(json, "mcp.json", &env)
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{json}: {err}");
        }
    }

    #[test]
    fn invalid_header_value_error_does_not_show_the_value() {
        let json =
            r#"{"mcpServers": {"a": {"url": "http://x", "headers": {"X-Key": "sec\nret-value"}}}}"#;
        let err = parse_servers(json, "mcp.json", &env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("headers.X-Key"), "{err}");
        assert!(!err.contains("ret-value"), "{err}");
    }

    #[test]
    fn disabled_servers_and_unknown_fields_are_noted() {
        let json = r#"{"mcpServers": {"a": {"command": "x", "autoApprove": []}, "b": {"command": "y", "disabled": true}}}"#;
        let set = parse_servers(json, "mcp.json", &env).unwrap();
        assert_eq!(set.servers.len(), 1);
        assert_eq!(set.notes.len(), 2, "{:?}", set.notes);
    }

    #[test]
    fn single_url_takes_headers_as_secrets() {
        let set = single_url(
            "up",
            "http://127.0.0.1:1/mcp",
            &["Authorization=Bearer ${TOKEN}".to_string()],
            &env,
        )
        .unwrap();
        assert!(set.secrets.contains(&"tok-abcdef".to_string()));
        assert!(single_url("up", "http://x", &["novalue".into()], &env).is_err());
        assert!(single_command("up", "  ", &env).is_err());
        assert!(single_command("up", "python 'unbalanced", &env).is_err());
    }
}
