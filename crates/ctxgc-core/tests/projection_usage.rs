//! Usage detection on hand-made runs: one test per normaliser, and the rules that keep
//! accidental matches out (short values, common words, values the agent already had, calls
//! of the same model turn).

use std::collections::BTreeSet;

use ctxgc_core::projection::Run;
use ctxgc_core::projection::usage::{UsageOptions, detect_usage};
use serde_json::{Value, json};

/// The fields of `output` used when the agent later writes `message`.
fn used_by_message(output: &str, message: &str) -> BTreeSet<String> {
    let mut run = Run::new("r");
    run.push_call("tool", json!({}), output, None);
    run.push_message(message, None);
    detect_usage(&run, &UsageOptions::default()).remove(0).used
}

/// The fields of `output` used when a later call takes `arguments`.
fn used_by_call(output: &str, arguments: Value) -> BTreeSet<String> {
    let mut run = Run::new("r");
    run.push_call("tool", json!({}), output, None);
    run.push_call("next", arguments, "{}", None);
    detect_usage(&run, &UsageOptions::default()).remove(0).used
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn case_and_whitespace_are_normalised() {
    let out = r#"{"city": "New   York", "street": "975 Sunset Drive"}"#;
    assert_eq!(
        used_by_message(out, "You live in NEW YORK."),
        set(&["city"])
    );
    assert_eq!(
        used_by_message(out, "at 975\nsunset  drive"),
        set(&["street"])
    );
}

#[test]
fn accents_fold() {
    let out = r#"{"agency": "Agence Calédonienne de Transit"}"#;
    assert_eq!(
        used_by_message(out, "I found Agence Caledonienne de Transit."),
        set(&["agency"])
    );
}

#[test]
fn number_formats_are_normalised() {
    let out = r#"{"balance": 1234.5, "fee": "1,050.00", "code": 42}"#;
    assert_eq!(
        used_by_message(out, "Your balance is $1,234.50 and the fee 1050."),
        set(&["balance", "fee"])
    );
    // Trailing zeros of a calculator's answer.
    let mut run = Run::new("r");
    run.push_call(
        "calculate",
        json!({"expression": "152 + 103"}),
        "255.0",
        None,
    );
    run.push_message("The total is $255.", None);
    assert!(
        detect_usage(&run, &UsageOptions::default())[0]
            .used
            .contains("(text)")
    );
}

#[test]
fn dates_in_common_formats_are_normalised() {
    let out =
        r#"{"departure": "2024-05-20", "created_at": "2024-05-15T15:00:00", "dob": "1990-04-05"}"#;
    for (message, field) in [
        ("You fly on May 20, 2024.", "departure"),
        ("You fly on 5/20/2024.", "departure"),
        ("You fly on 20 May 2024.", "departure"),
        ("You fly on May 20th.", "departure"),
        ("Booked on 2024-05-15 at 3:00 PM.", "created_at"),
        ("Born April 5th, 1990.", "dob"),
    ] {
        assert_eq!(used_by_message(out, message), set(&[field]), "{message}");
    }
}

#[test]
fn times_are_normalised() {
    let out = r#"{"flights": [{"number": "HAT069", "departs": "06:00:00"}, {"number": "HAT083", "departs": "19:00:00"}]}"#;
    assert_eq!(
        used_by_message(out, "The evening one leaves at 7:00 PM."),
        set(&["flights[].departs"])
    );
}

#[test]
fn a_value_inside_a_longer_string_counts() {
    let out = r#"{"flights": [{"flight_number": "HAT136", "gate": "B12"}]}"#;
    assert_eq!(
        used_by_call(out, json!({"note": "rebook onto flight HAT136 tomorrow"})),
        set(&["flights[].flight_number"])
    );
    // Arguments nested at any depth count.
    assert_eq!(
        used_by_call(
            out,
            json!({"flights": [{"flight_number": "HAT136", "date": "x"}]})
        ),
        set(&["flights[].flight_number"])
    );
}

#[test]
fn a_list_joined_into_text_counts() {
    let out = r#"{"colors": ["red", "blue", "green"], "sizes": ["S", "M"]}"#;
    // Three short common-ish words, each too short or plain alone, written out as one list.
    assert_eq!(
        used_by_message(out, "It comes in red, blue and green."),
        set(&["colors[]"])
    );
    // Two one-letter sizes are not specific enough, joined or not.
    assert!(used_by_message(out, "Sizes S or M.").is_empty());
}

#[test]
fn short_numbers_and_common_words_do_not_match_by_accident() {
    let out = r#"{"seats": 12, "bags": 2, "status": "available", "insurance": "no", "ok": true}"#;
    assert!(
        used_by_message(
            out,
            "There are 12 seats available, no insurance, 2 bags, ok."
        )
        .is_empty()
    );
}

#[test]
fn values_the_agent_already_had_are_no_evidence() {
    let mut run = Run::new("r");
    run.push_user("My reservation is ZFA04Y.");
    run.push_call(
        "get_reservation",
        json!({"reservation_id": "ZFA04Y"}),
        r#"{"reservation_id": "ZFA04Y", "cabin": "business"}"#,
        None,
    );
    run.push_message("Reservation ZFA04Y is in business.", None);
    let used = detect_usage(&run, &UsageOptions::default()).remove(0).used;
    assert_eq!(used, set(&["cabin"]));
    // The rule can be switched off.
    let all = detect_usage(
        &run,
        &UsageOptions {
            discount_known_values: false,
        },
    )
    .remove(0)
    .used;
    assert_eq!(all, set(&["cabin", "reservation_id"]));
}

#[test]
fn the_system_prompt_is_not_a_source_of_values() {
    let mut run = Run::new("r");
    run.push_prompt("Gold members get 3 free bags.");
    run.push_call("get_user", json!({}), r#"{"membership": "gold"}"#, None);
    run.push_message("As a gold member you have 3 free bags.", None);
    assert_eq!(
        detect_usage(&run, &UsageOptions::default())[0].used,
        set(&["membership"])
    );
}

#[test]
fn calls_of_the_same_turn_do_not_use_each_other() {
    let mut run = Run::new("r");
    let t = run.push_call("search", json!({}), r#"{"id": "HAT136X"}"#, Some(0));
    run.push_call("book", json!({"flight": "HAT136X"}), "{}", Some(t));
    let same_turn = detect_usage(&run, &UsageOptions::default());
    assert!(
        same_turn[0].used.is_empty(),
        "a sibling's arguments were written before the output"
    );
    let mut run = Run::new("r");
    run.push_call("search", json!({}), r#"{"id": "HAT136X"}"#, Some(0));
    run.push_call("book", json!({"flight": "HAT136X"}), "{}", Some(1));
    assert_eq!(
        detect_usage(&run, &UsageOptions::default())[0].used,
        set(&["id"])
    );
}

#[test]
fn text_written_before_the_output_is_no_evidence() {
    let mut run = Run::new("r");
    // The agent names the flight in the same turn as the call, before the output exists.
    let t = run.push_message("Let me look up HAT136X.", Some(0));
    run.push_call(
        "search",
        json!({}),
        r#"{"id": "HAT136X", "gate": "B12"}"#,
        Some(t),
    );
    assert!(
        detect_usage(&run, &UsageOptions::default())[0]
            .used
            .is_empty()
    );
}

#[test]
fn user_text_after_the_output_is_not_the_agent_using_it() {
    let mut run = Run::new("r");
    run.push_call("search", json!({}), r#"{"gate": "B12X"}"#, None);
    run.push_user("Is it gate B12X?");
    assert!(
        detect_usage(&run, &UsageOptions::default())[0]
            .used
            .is_empty()
    );
}

#[test]
fn json_inside_a_string_is_read_field_by_field() {
    let out = r#"{"error": "", "response": "{\"results\": [{\"title\": \"Quantum widgets explained\", \"views\": 48213}]}"}"#;
    assert_eq!(
        used_by_message(
            out,
            "The top result, Quantum widgets explained, has 48,213 views."
        ),
        set(&[
            "response<json>.results[].title",
            "response<json>.results[].views"
        ])
    );
    let python = r#"{"error": "", "response": "{'results': [{'title': 'Quantum widgets explained', 'views': 48213}]}"}"#;
    assert_eq!(
        used_by_message(python, "48213 views"),
        set(&["response<json>.results[].views"])
    );
}

#[test]
fn long_text_counts_when_quoted_in_part() {
    let out = "Traceback (most recent call last): File app.py line 12 in main raise ValueError invalid literal for int with base 10";
    assert!(
        used_by_message(
            out,
            "The error says: raise ValueError invalid literal for int."
        )
        .contains("(text)")
    );
    assert!(used_by_message(out, "There was an error.").is_empty());
}
