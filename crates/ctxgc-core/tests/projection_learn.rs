//! Learning projections from hand-made runs: the identifying-field rule, the counts behind
//! decisions, reviewed edits, subtraction for leave-one-out, determinism.

use ctxgc_core::Tokenizer;
use ctxgc_core::projection::counts::observe_run;
use ctxgc_core::projection::learn::FieldReason;
use ctxgc_core::projection::{Counts, LearnOptions, Projection, Run};
use serde_json::json;

/// Runs of a reservation tool where the agent quotes the price and nothing else.
fn runs(n: usize) -> Vec<Run> {
    (0..n)
        .map(|i| {
            let mut run = Run::new(format!("r{i}"));
            let output = json!({
                "reservation_id": format!("RES{i}X"),
                "passengers": [{"first_name": "Mia", "last_name": format!("Li{i}"), "seat_code": format!("{}C", 10 + i)}],
                "price": 300 + i,
                "created_by": "booking engine v2 (batch)",
                "internal": {"shard": "eu-west", "trace": "node alpha west"},
            })
            .to_string();
            run.push_call("get_reservation", json!({"id": i}), output, None);
            run.push_message(format!("The price is ${}.", 300 + i), None);
            run
        })
        .collect()
}

fn counts(runs: &[Run]) -> Counts {
    Counts::sum(
        runs.iter()
            .map(|r| observe_run(r, &Default::default(), Tokenizer::default()).counts)
            .collect::<Vec<_>>()
            .iter(),
    )
}

fn learned(runs: &[Run]) -> Projection {
    Projection::learn(
        &counts(runs),
        &LearnOptions::default(),
        Tokenizer::default(),
    )
}

fn fields(list: &[ctxgc_core::projection::learn::FieldDecision]) -> Vec<&str> {
    list.iter().map(|d| d.field.as_str()).collect()
}

#[test]
fn unused_fields_are_dropped_with_their_counts() {
    let p = learned(&runs(4));
    let t = &p.tools["get_reservation"];
    let mut dropped = fields(&t.drop);
    dropped.sort();
    assert_eq!(dropped, ["created_by", "internal.shard", "internal.trace"]);
    let d = t.drop.iter().find(|d| d.field == "created_by").unwrap();
    assert_eq!((d.seen, d.used, d.reason), (4, 0, FieldReason::NeverUsed));
    let price = t.keep.iter().find(|d| d.field == "price").unwrap();
    assert_eq!(
        (price.seen, price.used, price.reason),
        (4, 4, FieldReason::Used)
    );
    assert_eq!((t.calls, t.runs), (4, 4));
}

#[test]
fn identifying_fields_are_kept_even_unused() {
    let p = learned(&runs(4));
    let t = &p.tools["get_reservation"];
    for field in [
        "reservation_id",
        "passengers[].first_name",
        "passengers[].last_name",
    ] {
        let d = t
            .keep
            .iter()
            .find(|d| d.field == field)
            .unwrap_or_else(|| panic!("{field} kept"));
        assert_eq!(d.reason, FieldReason::Identifying, "{field}");
        assert_eq!(
            d.used, 0,
            "{field} is unused, kept for identifying a record"
        );
    }
    // By value: `seat_code` names nothing by its key but its values look like codes.
    let seat = t
        .keep
        .iter()
        .find(|d| d.field == "passengers[].seat_code")
        .unwrap();
    assert_eq!(seat.reason, FieldReason::Identifying);
    // Switched off, they go like any unused field.
    let off = Projection::learn(
        &counts(&runs(4)),
        &LearnOptions {
            keep_identifying: false,
            ..Default::default()
        },
        Tokenizer::default(),
    );
    assert!(fields(&off.tools["get_reservation"].drop).contains(&"reservation_id"));
}

#[test]
fn fields_seen_too_rarely_are_kept() {
    let p = learned(&runs(2));
    let t = &p.tools["get_reservation"];
    assert!(t.drop.is_empty(), "2 calls are fewer than min_calls = 3");
    assert!(
        t.keep
            .iter()
            .any(|d| d.reason == FieldReason::TooFewObservations)
    );
}

#[test]
fn rarely_used_fields_follow_the_share_rule() {
    let mut rs = runs(10);
    // One run of ten quotes the creator.
    rs[0].push_message("It was made by the booking engine v2 (batch).", None);
    let never = learned(&rs);
    assert!(!fields(&never.tools["get_reservation"].drop).contains(&"created_by"));
    let lenient = Projection::learn(
        &counts(&rs),
        &LearnOptions {
            max_used_share: 0.1,
            ..Default::default()
        },
        Tokenizer::default(),
    );
    let d = lenient.tools["get_reservation"]
        .drop
        .iter()
        .find(|d| d.field == "created_by")
        .unwrap();
    assert_eq!((d.used, d.reason), (1, FieldReason::RarelyUsed));
}

#[test]
fn a_field_sometimes_empty_sometimes_holding_fields_is_judged_by_its_fields() {
    let mut rs = Vec::new();
    for i in 0..4 {
        let mut run = Run::new(format!("r{i}"));
        let fulfil = if i == 3 {
            json!([{"tracking": "TRK998877"}])
        } else {
            json!([])
        };
        run.push_call(
            "order",
            json!({}),
            json!({"id": "A1", "fulfilments": fulfil}).to_string(),
            None,
        );
        run.push_message("ok", None);
        rs.push(run);
    }
    let p = learned(&rs);
    let t = &p.tools["order"];
    let d = t.keep.iter().find(|d| d.field == "fulfilments").unwrap();
    assert_eq!(d.reason, FieldReason::HoldsFields);
    // A learned drop of a field seen only empty never removes it when it holds something.
    let edited = Projection::from_json(
        r#"{"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0},
            "tools": {"order": {"drop": [{"field": "fulfilments", "reason": "never_used"}]}}}"#,
    )
    .unwrap();
    let full = edited.apply(
        "order",
        r#"{"id": "A1", "fulfilments": [{"tracking": "TRK998877"}]}"#,
    );
    assert!(full.text.contains("TRK998877"));
}

#[test]
fn reviewed_edits_are_respected() {
    let p = learned(&runs(4));
    let mut file: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    let tool = &mut file["tools"]["get_reservation"];
    // A person keeps `created_by` (moves it out of `drop`) and drops `price` by hand
    // (moves it from `keep` to `drop`).
    tool["keep"]
        .as_array_mut()
        .unwrap()
        .retain(|d| d["field"] != "price");
    let drop = tool["drop"].as_array_mut().unwrap();
    drop.retain(|d| d["field"] != "created_by");
    drop.push(json!({"field": "price"}));
    // ... and asks for hiding even when it saves little.
    file["rules"]["min_saving_tokens"] = json!(0);
    let edited = Projection::from_json(&file.to_string()).unwrap();
    let out = json!({
        "reservation_id": "RES9X", "passengers": [], "price": 310,
        "created_by": "booking engine v2 (batch)", "internal": {"shard": "eu-west", "trace": "node alpha west"}
    })
    .to_string();
    let trimmed = edited.apply("get_reservation", &out);
    assert!(trimmed.text.contains("booking engine"), "{}", trimmed.text);
    assert!(!trimmed.text.contains("310"), "{}", trimmed.text);
    assert!(trimmed.hidden.contains(&"price".to_string()));
    // `"trim": false` turns the tool off: re-serialised, nothing hidden.
    file["tools"]["get_reservation"]["trim"] = json!(false);
    let off = Projection::from_json(&file.to_string()).unwrap();
    let kept = off.apply("get_reservation", &out);
    assert!(kept.text.contains("310") && kept.text.contains("eu-west"));
    assert!(kept.receipt.is_none());
}

#[test]
fn counts_subtract_exactly_what_was_added() {
    let rs = runs(5);
    let per_run: Vec<Counts> = rs
        .iter()
        .map(|r| observe_run(r, &Default::default(), Tokenizer::default()).counts)
        .collect();
    let total = Counts::sum(per_run.iter());
    for (i, held_out) in per_run.iter().enumerate() {
        let others: Vec<&Counts> = per_run
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, c)| c)
            .collect();
        assert_eq!(total.without(held_out), Counts::sum(others));
    }
}

#[test]
fn learning_is_deterministic() {
    let a = learned(&runs(6)).to_json();
    let b = learned(&runs(6)).to_json();
    assert_eq!(a, b);
    // And the file reads back to the same projection.
    assert_eq!(Projection::from_json(&a).unwrap().to_json(), a);
}

#[test]
fn recall_backed_rules_hide_unused_identifying_and_rarely_used_fields() {
    let mut rs = runs(10);
    // One run of ten quotes the creator (1 of 10 calls), one quotes a passenger's last name.
    rs[0].push_message("It was made by the booking engine v2 (batch).", None);
    rs[1].push_message("The booking is under the name Li1.", None);
    let c = counts(&rs);
    let recallable = Projection::learn(&c, &LearnOptions::recallable(), Tokenizer::default());
    let t = &recallable.tools["get_reservation"];
    let reason = |list: &[ctxgc_core::projection::learn::FieldDecision], field: &str| {
        list.iter()
            .find(|d| d.field == field)
            .map(|d| (d.used, d.reason))
    };
    // Identifying fields no run used are hidden like any unused field.
    for field in [
        "reservation_id",
        "passengers[].first_name",
        "passengers[].seat_code",
    ] {
        assert_eq!(
            reason(&t.drop, field),
            Some((0, FieldReason::NeverUsed)),
            "{field}"
        );
    }
    // An identifying field some run used stays, however rarely it was used.
    assert_eq!(
        reason(&t.keep, "passengers[].last_name"),
        Some((1, FieldReason::Identifying))
    );
    // Other fields used in at most the share of their calls are hidden.
    assert_eq!(
        reason(&t.drop, "created_by"),
        Some((1, FieldReason::RarelyUsed))
    );
    assert_eq!(reason(&t.keep, "price"), Some((10, FieldReason::Used)));
    // Dropped identifying fields lose their values only, like every learned decision.
    let dropped = recallable.dropped("get_reservation").unwrap();
    assert_eq!(dropped.get("reservation_id"), Some(&true));

    // Without a recall channel nothing changes: the default rules keep all of them.
    let default = Projection::learn(&c, &LearnOptions::default(), Tokenizer::default());
    let t = &default.tools["get_reservation"];
    for field in ["reservation_id", "passengers[].first_name", "created_by"] {
        assert!(reason(&t.keep, field).is_some(), "{field} kept by default");
    }
    // The rules are written into the file only when they differ from the default ones, and
    // a file learned with them reads back the same.
    assert!(!default.to_json().contains("recallable"));
    let json = recallable.to_json();
    assert!(json.contains("\"recallable\": true"), "{json}");
    assert_eq!(Projection::from_json(&json).unwrap(), recallable);
}

#[test]
fn recall_backed_rules_still_keep_what_was_seen_too_rarely() {
    let p = Projection::learn(
        &counts(&runs(2)),
        &LearnOptions::recallable(),
        Tokenizer::default(),
    );
    let t = &p.tools["get_reservation"];
    assert!(t.drop.is_empty(), "2 calls are fewer than min_calls = 3");
    assert!(
        t.keep
            .iter()
            .any(|d| d.field == "reservation_id" && d.reason == FieldReason::TooFewObservations)
    );
}

/// Runs of a trip tool whose output names the trip's origin and destination, and each
/// payment method under its own id, twice; the agent quotes all of them.
fn trip_runs(n: usize) -> Vec<Run> {
    (0..n)
        .map(|i| {
            let mut run = Run::new(format!("t{i}"));
            let (from, to) = (format!("AP{i}X"), format!("BQ{i}Y"));
            let card = format!("card_{i}0071");
            let output = json!({
                "trip_code": format!("TRP{i}"),
                "origin": from,
                "destination": to,
                "flights": [{"origin": from, "destination": to, "fare": 120 + i}],
                "wallet": {card.clone(): {"id": card, "brand": "visa"}},
            })
            .to_string();
            run.push_call("get_trip", json!({"trip": i}), output, None);
            run.push_message(
                format!(
                    "Your trip goes from {from} to {to} for ${}, paid with {card}.",
                    120 + i
                ),
                None,
            );
            run
        })
        .collect()
}

#[test]
fn recall_backed_rules_hide_a_field_whose_values_another_kept_field_always_repeats() {
    let c = counts(&trip_runs(6));
    let f = &c.tools["get_trip"].fields["origin"];
    assert_eq!(f.used, 6);
    assert_eq!(f.echoed.get("flights[].origin"), Some(&6));

    let p = Projection::learn(&c, &LearnOptions::recallable(), Tokenizer::default());
    let t = &p.tools["get_trip"];
    let echo = |field: &str| {
        t.drop
            .iter()
            .find(|d| d.field == field)
            .map(|d| (d.reason, d.of.as_deref(), d.used))
    };
    assert_eq!(
        echo("origin"),
        Some((FieldReason::Echoed, Some("flights[].origin"), 6))
    );
    assert_eq!(
        echo("destination"),
        Some((FieldReason::Echoed, Some("flights[].destination"), 6))
    );
    assert_eq!(
        echo("wallet{}.id"),
        Some((FieldReason::Echoed, Some("wallet{}"), 6))
    );
    // The fields that show the values stay, and legs are never echoes of each other.
    for field in [
        "flights[].origin",
        "flights[].destination",
        "flights[].fare",
    ] {
        assert!(t.keep.iter().any(|d| d.field == field), "{field} kept");
    }
    assert_eq!(
        p.echoes("get_trip"),
        [
            ("destination", "flights[].destination"),
            ("origin", "flights[].origin"),
            ("wallet{}.id", "wallet{}")
        ]
    );
    // The file says what each echo repeats, and reads back the same.
    let json = p.to_json();
    assert!(json.contains("\"of\": \"flights[].origin\""), "{json}");
    assert_eq!(Projection::from_json(&json).unwrap(), p);

    // Applied: the labels go, every value the agent quoted is still there.
    let raw = trip_runs(7).pop().unwrap().calls[0].output.clone().unwrap();
    let trimmed = p.apply("get_trip", &raw);
    for value in ["AP6X", "BQ6Y", "card_60071", "126"] {
        assert!(trimmed.text.contains(value), "{value}: {}", trimmed.text);
    }
    assert!(trimmed.removed.is_empty());

    // Without a recall channel the default rules keep them.
    let default = Projection::learn(&c, &LearnOptions::default(), Tokenizer::default());
    let t = &default.tools["get_trip"];
    assert!(t.keep.iter().any(|d| d.field == "origin"));
    assert!(t.drop.iter().all(|d| d.reason != FieldReason::Echoed));
    assert!(default.echoes("get_trip").is_empty());
}

#[test]
fn a_field_that_only_sometimes_repeats_another_is_no_echo() {
    let mut runs = trip_runs(6);
    // In one run of six the trip's origin differs from its first flight's.
    let other = json!({"trip_code": "TRP9", "origin": "ZZ9Q", "destination": "BQ9Y",
        "flights": [{"origin": "AP9X", "destination": "BQ9Y", "fare": 129}],
        "wallet": {"card_90071": {"id": "card_90071", "brand": "visa"}}})
    .to_string();
    runs[5] = Run::new("odd");
    runs[5].push_call("get_trip", json!({"trip": 9}), other, None);
    runs[5].push_message("From ZZ9Q via AP9X to BQ9Y, paid with card_90071.", None);
    let p = Projection::learn(
        &counts(&runs),
        &LearnOptions::recallable(),
        Tokenizer::default(),
    );
    let t = &p.tools["get_trip"];
    assert!(t.keep.iter().any(|d| d.field == "origin"), "{t:?}");
    assert!(
        t.drop
            .iter()
            .any(|d| d.field == "destination" && d.reason == FieldReason::Echoed)
    );
}
