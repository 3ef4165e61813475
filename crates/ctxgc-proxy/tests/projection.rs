//! `--config`: a reviewed projection applied through the proxy to a real server's outputs,
//! and `expand` giving back exactly what was hidden.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_core::projection::Projection;
use ctxgc_proxy::reviewed::ReviewedProjection;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(20);

const REVIEWED: &str = r#"{"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0},
  "tools": {"search_flights": {"drop": [
    {"field": "flights[].fare_rules"}, {"field": "flights[].aircraft"},
    {"field": "flights[].amenities"}, {"field": "disclaimer"}]}}}"#;

fn reviewed() -> Arc<ReviewedProjection> {
    Arc::new(ReviewedProjection::new(
        Projection::from_json(REVIEWED).expect("the reviewed projection parses"),
    ))
}

/// The body (first line) and the reference of a trimmed output.
fn split_trimmed(text: &str) -> (Value, String) {
    let (body, footer) = text.rsplit_once('\n').expect("a footer line");
    assert!(footer.starts_with("[hidden: "), "{footer}");
    let reference = footer
        .split("expand ref \"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a reference in the footer")
        .to_owned();
    (
        serde_json::from_str(body).expect("the body is JSON"),
        reference,
    )
}

#[tokio::test]
async fn outputs_are_trimmed_per_projection_and_expand_gives_back_the_originals() {
    let servers = set_of(vec![stdio_server("travel", &[])], &[]);
    let (agent, _) = proxy_over_pipe(core(&servers, reviewed(), TIMEOUT)).await;
    let direct = direct_stdio(&[]).await;
    let original = text_of(
        &direct
            .call_tool(call("search_flights", flights_args()))
            .await
            .unwrap(),
    );
    let original_value: Value = serde_json::from_str(&original).unwrap();

    // The upstream tools are listed as they are, plus expand.
    let tools = agent.list_all_tools().await.unwrap();
    let upstream = direct.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), upstream.len() + 1);
    for tool in &upstream {
        assert!(tools.contains(tool), "{} changed", tool.name);
    }
    let expand = tools
        .iter()
        .find(|t| t.name == "expand")
        .expect("expand is offered");
    assert!(expand.input_schema.contains_key("properties"));

    let (trimmed, is_error) = call_text(&agent, "search_flights", flights_args()).await;
    assert!(!is_error);
    assert!(
        trimmed.len() < original.len() * 3 / 4,
        "{} vs {}",
        trimmed.len(),
        original.len()
    );
    let (body, reference) = split_trimmed(&trimmed);
    for flight in body["flights"].as_array().unwrap() {
        assert!(flight.get("fare_rules").is_none() && flight.get("aircraft").is_none());
        assert!(flight.get("price").is_some() && flight.get("id").is_some());
    }
    assert!(body.get("disclaimer").is_none());
    // What is kept is the original's, value for value.
    assert_eq!(
        body["flights"][3]["price"],
        original_value["flights"][3]["price"]
    );

    // Expand one field: every concrete value, exactly.
    let (back, is_error) = call_text(
        &agent,
        "expand",
        json!({"ref": reference, "fields": ["flights[].fare_rules"]}),
    )
    .await;
    assert!(!is_error, "{back}");
    let back: Value = serde_json::from_str(&back).unwrap();
    let flights = original_value["flights"].as_array().unwrap();
    assert_eq!(back.as_object().unwrap().len(), flights.len());
    for (i, flight) in flights.iter().enumerate() {
        assert_eq!(
            back[format!("flights[{i}].fare_rules")],
            flight["fare_rules"]
        );
    }
    // Expand "*": the whole original, byte for byte, and never trimmed again.
    let (whole, _) = call_text(&agent, "expand", json!({"ref": reference, "fields": ["*"]})).await;
    assert_eq!(whole, original);

    // Tools the projection does not name go through unchanged.
    let (customer, _) = call_text(&agent, "get_customer", json!({"customer_id": "C7"})).await;
    let direct_customer = text_of(
        &direct
            .call_tool(call("get_customer", json!({"customer_id": "C7"})))
            .await
            .unwrap(),
    );
    assert_eq!(
        serde_json::from_str::<Value>(&customer).unwrap(),
        serde_json::from_str::<Value>(&direct_customer).unwrap()
    );

    // A bad expand is a tool error the agent can act on.
    let (message, is_error) = call_text(&agent, "expand", json!({"ref": "nosuchref"})).await;
    assert!(is_error && message.contains("nosuchref"), "{message}");
    agent.cancel().await.unwrap();
    direct.cancel().await.unwrap();
}

#[tokio::test]
async fn trimming_is_deterministic() {
    let servers = set_of(
        vec![stdio_server("travel", &["--tools", "search_flights"])],
        &[],
    );
    let (first, _) = proxy_over_pipe(core(&servers, reviewed(), TIMEOUT)).await;
    let (second, _) = proxy_over_pipe(core(&servers, reviewed(), TIMEOUT)).await;
    let a = call_text(&first, "search_flights", flights_args()).await;
    let b = call_text(&second, "search_flights", flights_args()).await;
    assert_eq!(a, b);
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
}

#[tokio::test]
async fn an_upstream_tool_named_expand_is_prefixed() {
    let servers = set_of(vec![stdio_server("srv", &[])], &[]);
    let (agent, events) = proxy_over_pipe(core(&servers, reviewed(), TIMEOUT)).await;
    call_text(&agent, "add_tool", json!({"name": "expand"})).await;
    wait_for_list_changes(&events, 1).await;
    let tools = names(&agent.list_all_tools().await.unwrap());
    assert!(tools.contains(&"srv_expand".to_owned()), "{tools:?}");
    assert_eq!(tools.iter().filter(|n| *n == "expand").count(), 1);
    assert_eq!(
        call_text(&agent, "srv_expand", json!({"text": "upstream's"})).await,
        ("expand: upstream's".to_owned(), false)
    );
    let (own, is_error) = call_text(&agent, "expand", json!({"ref": "x"})).await;
    assert!(is_error && own.starts_with("expand:"), "{own}");
    agent.cancel().await.unwrap();
}
