//! Applying projections: compact output without the dropped fields, one footer line, exact
//! `expand`, determinism, and the outputs that are never trimmed.

use ctxgc_core::projection::Projection;
use ctxgc_core::projection::apply::{
    ExpandError, MemoryReceipts, Outcome, ReceiptStore, Untrimmed, expand, expand_tool,
};
use ctxgc_core::projection::fields::{leaves, parse_output};
use serde_json::{Value, json};

fn projection(drop: &[&str]) -> Projection {
    let drop: Vec<Value> = drop
        .iter()
        .map(|f| json!({"field": f, "reason": "never_used"}))
        .collect();
    Projection::from_json(
        &json!({"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0}, "tools": {"search": {"drop": drop}}})
            .to_string(),
    )
    .unwrap()
}

const FLIGHTS: &str = r#"[{"flight_number": "HAT069", "origin": "JFK", "status": "available", "available_seats": {"basic_economy": 17, "economy": 12}, "prices": {"basic_economy": 51, "economy": 121.50}}, {"flight_number": "HAT083", "origin": "JFK", "status": "available", "available_seats": {"basic_economy": 16, "economy": 7}, "prices": {"basic_economy": 87, "economy": 100}}]"#;

#[test]
fn dropped_fields_go_and_one_footer_line_says_so() {
    let p = projection(&[
        "[].status",
        "[].available_seats.basic_economy",
        "[].available_seats.economy",
    ]);
    let t = p.apply("search", FLIGHTS);
    assert_eq!(t.outcome, Outcome::Trimmed);
    let (body, footer) = t.text.split_once('\n').unwrap();
    assert_eq!(
        body,
        r#"[{"flight_number":"HAT069","origin":"JFK","prices":{"basic_economy":51,"economy":121.50}},{"flight_number":"HAT083","origin":"JFK","prices":{"basic_economy":87,"economy":100}}]"#
    );
    let reference = &t.receipt.as_ref().unwrap().reference;
    // A list all of whose fields went is named once.
    assert_eq!(
        footer,
        format!("[hidden: [].{{status,available_seats}} — expand ref \"{reference}\"]")
    );
    assert_eq!(t.hidden_values, 6);
    assert!(!footer.contains('\n'));
}

#[test]
fn trim_then_expand_gives_back_the_original_values_exactly() {
    let p = projection(&[
        "[].status",
        "[].available_seats.economy",
        "[].prices.economy",
    ]);
    let t = p.apply("search", FLIGHTS);
    let mut store = MemoryReceipts::default();
    let receipt = t.receipt.clone().unwrap();
    store.put(receipt.clone()).unwrap();
    let r = receipt.reference.as_str();
    // "*" is the original text, byte for byte.
    assert_eq!(
        expand(&store, &json!({"ref": r, "fields": ["*"]})).unwrap(),
        FLIGHTS
    );
    assert_eq!(expand(&store, &json!({"ref": r})).unwrap(), FLIGHTS);
    // Field paths give each hidden value under its concrete path, numbers as written.
    let back: Value = serde_json::from_str(
        &expand(
            &store,
            &json!({"ref": r, "fields": ["[].prices.economy", "[].status"]}),
        )
        .unwrap(),
    )
    .unwrap();
    let expected: Value = serde_json::from_str(
        r#"{"[0].prices.economy": 121.50, "[1].prices.economy": 100, "[0].status": "available", "[1].status": "available"}"#,
    )
    .unwrap();
    assert_eq!(back, expected);
    assert!(
        back.to_string().contains("121.50"),
        "the number keeps its text"
    );
    // Every hidden leaf comes back equal to the original's, whichever way it is asked for.
    let original = parse_output(FLIGHTS);
    for leaf in leaves(&original) {
        if t.removed.contains(&leaf.path) {
            let one: Value = serde_json::from_str(
                &expand(
                    &store,
                    &json!({"ref": r, "fields": [leaf.concrete.clone()]}),
                )
                .unwrap(),
            )
            .unwrap();
            assert_eq!(Some(&one[&leaf.concrete]), leaf.value, "{}", leaf.concrete);
        }
    }
    // The footer's grouped form is accepted as it is written.
    let grouped: Value = serde_json::from_str(
        &expand(&store, &json!({"ref": r, "fields": "[].{status,prices}"})).unwrap(),
    )
    .unwrap();
    assert_eq!(grouped["[1].status"], "available");
    assert_eq!(
        grouped["[1].prices"],
        json!({"basic_economy": 87, "economy": 100})
    );
}

#[test]
fn expand_errors_say_what_to_do() {
    let p = projection(&[
        "[].status",
        "[].available_seats.economy",
        "[].available_seats.basic_economy",
    ]);
    let t = p.apply("search", FLIGHTS);
    let mut store = MemoryReceipts::default();
    let r = t.receipt.clone().unwrap().reference;
    store.put(t.receipt.unwrap()).unwrap();
    let err = expand(&store, &json!({"ref": "nosuchref"})).unwrap_err();
    assert!(matches!(err, ExpandError::UnknownReference(_)));
    let err = expand(&store, &json!({"ref": r, "fields": ["[].gate"]})).unwrap_err();
    assert!(err.to_string().contains("[].status"), "{err}");
    assert!(err.to_string().contains("[].gate"), "{err}");
    let err = expand(&store, &json!({"fields": ["*"]})).unwrap_err();
    assert!(err.to_string().contains("`ref` is missing"), "{err}");
    let err = expand(&store, &json!({"ref": r, "fields": [3]})).unwrap_err();
    assert!(err.to_string().contains("fields[0]"), "{err}");
    // Arguments as JSON text work the same.
    let text = format!(r#"{{"ref": "{r}", "fields": ["*"]}}"#);
    assert_eq!(expand(&store, &Value::String(text)).unwrap(), FLIGHTS);
}

#[test]
fn trimming_is_deterministic() {
    let p = projection(&["[].status", "[].prices.basic_economy"]);
    let a = p.apply("search", FLIGHTS);
    let b = p.apply("search", FLIGHTS);
    assert_eq!(a, b);
    assert_eq!(a.receipt.unwrap().reference, b.receipt.unwrap().reference);
}

#[test]
fn errors_are_never_trimmed_and_unknown_tools_only_compacted() {
    let p = projection(&["(text)", "error"]);
    let t = p.apply(
        "search",
        "Error: payment amount does not add up, total price is 305",
    );
    assert_eq!(
        (t.outcome, t.untrimmed),
        (Outcome::AsIs, Some(Untrimmed::Failure))
    );
    let t = p.apply_flagged("search", r#"{"detail": "x"}"#, true);
    assert_eq!(t.untrimmed, Some(Untrimmed::Failure));
    let t = p.apply("other", r#"{"a": 1,  "b": [1, 2]}"#);
    assert_eq!(
        (t.outcome, t.text.as_str()),
        (Outcome::Compacted, r#"{"a":1,"b":[1,2]}"#)
    );
    assert_eq!(t.untrimmed, Some(Untrimmed::UnknownTool));
    let t = p.apply("other", "plain text stays as it is");
    assert_eq!(
        (t.outcome, t.text.as_str()),
        (Outcome::AsIs, "plain text stays as it is")
    );
}

#[test]
fn a_whole_text_output_dropped_by_a_person_leaves_only_the_footer() {
    let p = projection(&["(text)"]);
    let t = p.apply(
        "search",
        "File created: /tmp/a.py (1 line). Nothing else to report here.",
    );
    assert_eq!(t.outcome, Outcome::Trimmed);
    assert!(
        t.text.starts_with("[hidden: the whole output — expand ref"),
        "{}",
        t.text
    );
}

#[test]
fn nothing_is_hidden_when_it_would_not_pay_for_its_footer() {
    let p = Projection::from_json(
        r#"{"ctxgc_projection": 1, "tools": {"search": {"drop": [{"field": "[].origin"}]}}}"#,
    )
    .unwrap();
    let t = p.apply("search", FLIGHTS);
    assert_eq!(t.untrimmed, Some(Untrimmed::NotWorthIt));
    assert!(t.text.contains("\"origin\":\"JFK\""));
    assert!(t.receipt.is_none(), "no stub without a receipt");
}

#[test]
fn json_inside_a_string_is_trimmed_inside_and_stays_a_string() {
    let p = Projection::from_json(
        r#"{"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0}, "tools": {"seo": {"drop": [{"field": "response<json>.results[].snippet"}]}}}"#,
    )
    .unwrap();
    let out = r#"{"error": "", "response": "{'results': [{'title': 'A', 'snippet': 'a long snippet of text that goes on about widgets and gadgets for quite a while'}, {'title': 'B', 'snippet': 'another long snippet of text about the very same widgets, gadgets and gizmos'}]}"}"#;
    let t = p.apply("seo", out);
    let body: Value = serde_json::from_str(t.text.lines().next().unwrap()).unwrap();
    assert_eq!(
        body["response"],
        json!(r#"{"results":[{"title":"A"},{"title":"B"}]}"#)
    );
}

#[test]
fn the_store_keeps_the_most_recent_and_the_expand_tool_is_described() {
    let p = projection(&[
        "[].status",
        "[].available_seats.economy",
        "[].available_seats.basic_economy",
    ]);
    let mut store = MemoryReceipts::with_capacity(1);
    let first = p.apply("search", FLIGHTS).receipt.unwrap();
    let second = p
        .apply("search", &FLIGHTS.replace("HAT069", "HAT070"))
        .receipt
        .unwrap();
    store.put(first.clone()).unwrap();
    store.put(second.clone()).unwrap();
    assert_eq!(store.len(), 1);
    assert!(store.get(&first.reference).unwrap().is_none());
    assert!(store.get(&second.reference).unwrap().is_some());
    let tool = expand_tool();
    assert_eq!(tool.name, "expand");
    assert_eq!(tool.input_schema["required"], json!(["ref"]));
    assert!(tool.description.contains("[hidden:"));
}

/// A reviewed projection dropping `origin` as an echo of `flights[].origin`, an entry's
/// `id` as an echo of its key, and `notes` as unused; `also_drop` adds fields dropped as
/// unused.
fn echo_projection(also_drop: &[&str]) -> Projection {
    let mut drop = vec![
        json!({"field": "origin", "reason": "echoed", "of": "flights[].origin"}),
        json!({"field": "wallet{}.id", "reason": "echoed", "of": "wallet{}"}),
        json!({"field": "notes", "reason": "never_used"}),
    ];
    drop.extend(
        also_drop
            .iter()
            .map(|f| json!({"field": f, "reason": "never_used"})),
    );
    Projection::from_json(
        &json!({"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0}, "tools": {"get_trip": {"drop": drop}}})
            .to_string(),
    )
    .unwrap()
}

/// Asserts that `t` was trimmed to `body`, under a footer starting with `footer_start`.
fn assert_trimmed(t: &ctxgc_core::projection::Trimmed, body: &str, footer_start: &str) {
    assert_eq!(t.outcome, Outcome::Trimmed);
    let (sent, footer) = t.text.split_once('\n').unwrap();
    assert_eq!(sent, body);
    assert!(footer.starts_with(footer_start), "{footer}");
}

#[test]
fn an_echo_is_hidden_only_where_its_values_are_still_shown() {
    let p = echo_projection(&[]);
    let echoed = r#"{"trip": "T1", "notes": "booked by phone, agent 17, confirmation sent twice", "origin": "MIA", "flights": [{"origin": "MIA", "to": "LAX"}, {"origin": "LAX", "to": "MIA"}], "wallet": {"card_7001": {"id": "card_7001", "brand": "visa"}}}"#;
    let t = p.apply("get_trip", echoed);
    assert_trimmed(
        &t,
        r#"{"trip":"T1","flights":[{"origin":"MIA","to":"LAX"},{"origin":"LAX","to":"MIA"}],"wallet":{"card_7001":{"brand":"visa"}}}"#,
        "[hidden: notes, origin, wallet{}.id — ",
    );
    // Only the notes left the text: the echoes' values are still in it (no miss to measure).
    assert_eq!(t.removed.iter().collect::<Vec<_>>(), ["notes"]);
    assert_eq!(t.hidden_values, 3);

    // Where the trip's origin is not among its flights', it stays; so does an entry's id
    // that is not its own key.
    let not_echoed = r#"{"trip": "T2", "notes": "booked by phone, agent 17, confirmation sent twice", "origin": "JFK", "flights": [{"origin": "MIA", "to": "LAX"}], "wallet": {"card_7001": {"id": "card_7002", "brand": "visa"}}}"#;
    assert_trimmed(
        &p.apply("get_trip", not_echoed),
        r#"{"trip":"T2","origin":"JFK","flights":[{"origin":"MIA","to":"LAX"}],"wallet":{"card_7001":{"id":"card_7002","brand":"visa"}}}"#,
        "[hidden: notes — ",
    );
}

#[test]
fn an_echo_of_a_field_that_is_itself_dropped_stays() {
    let p = echo_projection(&["flights[].origin"]);
    let t = p.apply(
        "get_trip",
        r#"{"trip": "T1", "notes": "booked by phone, agent 17, confirmation sent twice", "origin": "MIA", "flights": [{"origin": "MIA", "to": "LAX"}]}"#,
    );
    // MIA is still shown once: the trip's origin stays.
    assert_trimmed(
        &t,
        r#"{"trip":"T1","origin":"MIA","flights":[{"to":"LAX"}]}"#,
        "[hidden: notes, flights[].origin — ",
    );
    assert_eq!(
        t.removed.iter().collect::<Vec<_>>(),
        ["flights[].origin", "notes"]
    );
}
