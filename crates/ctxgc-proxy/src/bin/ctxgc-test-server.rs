//! `ctxgc-test-server`: a small, real MCP server for the proxy's integration tests and
//! benchmarks. It serves stdio (default) or streamable HTTP on loopback (`--http PORT`, the
//! URL printed on stdout), with tools whose outputs are bulky JSON, and triggers for what the
//! proxy must survive: a tool-list change, a crash, a hang, garbage on stdout, and a
//! credential (env or bearer header) it checks and can be made to leak.
//!
//! Options: `--tools a,b` (publish only these), `--require-env VAR` (refuse calls unless VAR
//! is set), `--require-bearer TOKEN` (HTTP: refuse requests without it), `--label L` (`echo`
//! answers `L: TEXT`, to tell two instances apart).

use std::borrow::Cow;
use std::io::Write;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone)]
struct TestServer {
    only: Option<Vec<String>>,
    added: Arc<Mutex<Vec<String>>>,
    require_env: Option<String>,
    http: bool,
    label: Option<String>,
}

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let value = json!({"type": "object", "properties": properties, "required": required});
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn builtin_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "search_flights",
            "Search flights between two airports; returns every fare with its full details.",
            schema(
                json!({"origin": {"type": "string", "description": "IATA code"},
                       "destination": {"type": "string", "description": "IATA code"}}),
                &["origin", "destination"],
            ),
        ),
        Tool::new(
            "get_customer",
            "A customer record with its addresses, preferences and history.",
            schema(json!({"customer_id": {"type": "string"}}), &["customer_id"]),
        ),
        Tool::new(
            "echo",
            "Returns its text.",
            schema(json!({"text": {"type": "string"}}), &["text"]),
        ),
        Tool::new(
            "add_tool",
            "Adds a tool named NAME (an echo) and announces the new tool list.",
            schema(json!({"name": {"type": "string"}}), &["name"]),
        ),
        Tool::new(
            "crash",
            "Exits the server process at once.",
            schema(json!({}), &[]),
        ),
        Tool::new("hang", "Never answers.", schema(json!({}), &[])),
        Tool::new(
            "garbage",
            "Writes bytes that are not MCP on stdout instead of an answer.",
            schema(json!({}), &[]),
        ),
        Tool::new(
            "whoami",
            "Says whether the server's credential was received.",
            schema(json!({}), &[]),
        ),
        Tool::new(
            "leak_credential",
            "Misbehaves: returns the credential it received in its output.",
            schema(json!({}), &[]),
        ),
        Tool::new(
            "fail_with_credential",
            "Misbehaves: fails with an error message quoting its credential.",
            schema(json!({}), &[]),
        ),
    ]
}

fn arg<'a>(request: &'a CallToolRequestParams, name: &str) -> &'a str {
    request
        .arguments
        .as_ref()
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Deterministic, bulky flight results: what an agent reads much more of than it uses.
fn flights(origin: &str, destination: &str) -> Value {
    let airlines = ["Aurora Air", "Boreal", "Cirrus Lines", "Delta Nova"];
    let list: Vec<Value> = (0..12)
        .map(|i| {
            json!({
                "id": format!("FL-{origin}{destination}-{:03}", 100 + i),
                "airline": airlines[i % airlines.len()],
                "flight_number": format!("{}{}", &airlines[i % airlines.len()][..2].to_uppercase(), 4100 + i * 7),
                "origin": origin,
                "destination": destination,
                "departure": format!("2025-03-{:02}T{:02}:{:02}:00Z", 10 + i % 5, 6 + i, (i * 13) % 60),
                "arrival": format!("2025-03-{:02}T{:02}:{:02}:00Z", 10 + i % 5, 9 + i, (i * 29) % 60),
                "price": {"amount": format!("{}.{:02}", 189 + i * 23, (i * 37) % 100), "currency": "EUR"},
                "seats_left": (i * 5) % 17 + 1,
                "aircraft": {"type": if i % 2 == 0 {"A320neo"} else {"B737-800"}, "registration": format!("EI-D{:02}X", i), "age_years": 3 + i % 9},
                "fare_rules": format!("Fare class {}: changes permitted up to 24 hours before departure against a fee of {} EUR plus any fare difference; refunds only for taxes and airport charges; no-show forfeits the whole fare; name changes not permitted; seat selection charged separately unless the fare includes it.", ["Y", "B", "M", "H"][i % 4], 40 + i * 5),
                "baggage": {"cabin": "1 x 8 kg", "checked": if i % 3 == 0 {"none"} else {"1 x 23 kg"}, "sports_equipment": "on request"},
                "emissions_kg_co2": 92 + i * 4,
                "on_time_performance": {"last_30_days": format!("{}%", 71 + i % 20), "average_delay_minutes": 7 + i % 11},
                "amenities": ["wifi", "power outlets", "snacks for purchase"],
            })
        })
        .collect();
    json!({"query": {"origin": origin, "destination": destination, "passengers": 1},
           "currency": "EUR", "results": list.len(), "flights": list,
           "disclaimer": "Prices include taxes and fees known at the time of search and may change until ticketed."})
}

fn customer(id: &str) -> Value {
    json!({
        "customer_id": id,
        "name": "Ada Lovelace",
        "email": "ada@example.test",
        "tier": "gold",
        "addresses": [
            {"kind": "billing", "line1": "12 Analytical Row", "city": "London", "postcode": "N1 9GU", "country": "GB"},
            {"kind": "shipping", "line1": "1 Difference Lane", "city": "Cambridge", "postcode": "CB2 1TN", "country": "GB"}
        ],
        "preferences": {"seat": "aisle", "meal": "vegetarian", "newsletter": false, "language": "en-GB"},
        "history": (0..8).map(|i| json!({"order": format!("ORD-{:05}", 7700 + i), "total": format!("{}.00", 120 + i * 15), "status": if i % 3 == 0 {"refunded"} else {"delivered"}})).collect::<Vec<_>>(),
        "notes": "Prefers contact by email. Asked twice about lounge access on long-haul flights."
    })
}

fn text_result(value: &Value) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(
        value.to_string(),
    )]))
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let mut tools: Vec<Tool> = builtin_tools()
            .into_iter()
            .filter(|t| {
                self.only
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|n| n == t.name.as_ref()))
            })
            .collect();
        if let Ok(added) = self.added.lock() {
            for name in added.iter() {
                tools.push(Tool::new(
                    Cow::Owned(name.clone()),
                    "An echo tool added at run time.",
                    schema(json!({"text": {"type": "string"}}), &[]),
                ));
            }
        }
        tools
    }

    fn credential(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        if self.http {
            context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|p| p.headers.get("authorization"))
                .and_then(|h| h.to_str().ok())
                .map(str::to_owned)
        } else {
            self.require_env
                .as_ref()
                .and_then(|var| std::env::var(var).ok())
        }
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("ctxgc-test-server", "1.0.0"))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.tools().iter().any(|t| t.name == name) {
            return Err(ErrorData::invalid_params(format!("no tool {name:?}"), None));
        }
        if let Some(var) = &self.require_env
            && !self.http
            && std::env::var(var).map(|v| v.is_empty()).unwrap_or(true)
        {
            return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text(format!("credential {var} missing")),
            ])));
        }
        match name.as_str() {
            "search_flights" => Ok(text_result(&flights(
                arg(&request, "origin"),
                arg(&request, "destination"),
            ))),
            "get_customer" => Ok(text_result(&customer(arg(&request, "customer_id")))),
            "echo" => {
                let text = arg(&request, "text");
                let text = match &self.label {
                    Some(label) => format!("{label}: {text}"),
                    None => text.to_owned(),
                };
                Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                    ContentBlock::text(text),
                ])))
            }
            "add_tool" => {
                let new = arg(&request, "name").to_owned();
                if let Ok(mut added) = self.added.lock() {
                    added.push(new.clone());
                }
                let peer = context.peer.clone();
                tokio::spawn(async move {
                    let _ = peer.notify_tool_list_changed().await;
                });
                Ok(text_result(&json!({"added": new})))
            }
            "crash" => {
                let _ = std::io::stderr().write_all(b"ctxgc-test-server: crashing on request\n");
                std::process::exit(3);
            }
            "hang" => {
                std::future::pending::<()>().await;
                Ok(text_result(&json!({})))
            }
            "garbage" => {
                let id = serde_json::to_string(&context.id).unwrap_or_else(|_| "0".into());
                {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(b"\x00\xffthis is not JSON-RPC at all\n");
                    let _ = out.write_all(
                        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":\"not a list\",\"isError\":\"maybe\"}}}}\n")
                            .as_bytes(),
                    );
                    let _ = out.flush();
                }
                std::future::pending::<()>().await;
                Ok(text_result(&json!({})))
            }
            "whoami" => {
                let ok = self.credential(&context).is_some_and(|c| !c.is_empty());
                Ok(text_result(&json!({"authenticated": ok})))
            }
            "leak_credential" => {
                let credential = self.credential(&context).unwrap_or_default();
                Ok(text_result(
                    &json!({"credential": credential, "note": format!("the key is {credential}")}),
                ))
            }
            "fail_with_credential" => {
                let credential = self.credential(&context).unwrap_or_default();
                Err(ErrorData::internal_error(
                    format!("backend rejected key {credential}"),
                    Some(json!({"key": credential})),
                ))
            }
            other => Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::text(format!("{other}: {}", arg(&request, "text"))),
            ]))),
        }
    }
}

struct Args {
    http: Option<u16>,
    only: Option<Vec<String>>,
    require_env: Option<String>,
    require_bearer: Option<String>,
    label: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        http: None,
        only: None,
        require_env: None,
        require_bearer: None,
        label: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--http" => {
                args.http = Some(value()?.parse().map_err(|e| format!("--http: {e}"))?);
            }
            "--tools" => args.only = Some(value()?.split(',').map(str::to_owned).collect()),
            "--require-env" => args.require_env = Some(value()?),
            "--require-bearer" => args.require_bearer = Some(value()?),
            "--label" => args.label = Some(value()?),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(args)
}

async fn serve_http(server: TestServer, port: u16, bearer: Option<String>) -> std::io::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
    let expected = bearer.map(|b| format!("Bearer {b}"));
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let expected = expected.clone();
                async move {
                    let given = request
                        .headers()
                        .get("authorization")
                        .and_then(|h| h.to_str().ok());
                    match &expected {
                        Some(e) if given != Some(e.as_str()) => {
                            axum::response::IntoResponse::into_response((
                                axum::http::StatusCode::UNAUTHORIZED,
                                "bad credential",
                            ))
                        }
                        _ => next.run(request).await,
                    }
                }
            },
        ));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("http://{}/mcp", listener.local_addr()?);
    std::io::stdout().flush()?;
    axum::serve(listener, app).await
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ctxgc-test-server: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let server = TestServer {
        only: args.only,
        added: Arc::new(Mutex::new(Vec::new())),
        require_env: args.require_env,
        http: args.http.is_some(),
        label: args.label,
    };
    let result = match args.http {
        Some(port) => serve_http(server, port, args.require_bearer).await,
        None => match server.serve(rmcp::transport::stdio()).await {
            Ok(running) => running
                .waiting()
                .await
                .map(|_| ())
                .map_err(std::io::Error::other),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        },
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ctxgc-test-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
