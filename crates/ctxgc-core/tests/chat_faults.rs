//! One test per fault of contextgc 0.4.6 listed in `shared/reference/README.md`: each is a
//! behaviour ctxgc must get right.

use ctxgc_core::chat::compact::decode_tables;
use ctxgc_core::chat::plain::from_plain;
use ctxgc_core::chat::{ChatConfig, ChatOptions, Preset};
use ctxgc_core::frontend::openai::lower_messages;
use ctxgc_core::passes::chat_pipeline;
use ctxgc_core::{Action, Compiled, Options, Reason, Session, compile};
use serde_json::{Value, json};

mod common;
use common::preset_options;

const PRESETS: [Preset; 3] = [Preset::Lossless, Preset::Default, Preset::Aggressive];

fn run(messages: &[Value], preset: Preset) -> Compiled {
    let options = preset_options(preset);
    compile(&Value::Array(messages.to_vec()).to_string(), &options).expect("compiles")
}

fn out(c: &Compiled) -> Vec<Value> {
    serde_json::from_str(&c.output).unwrap()
}

fn state(body: Value) -> String {
    format!("<contextgc-state>{body}</contextgc-state>")
}

/// A synthetic coding session: 250 tool calls, each in an assistant turn that also declares
/// the file under edit, which every later turn supersedes.
fn coding_session() -> Vec<Value> {
    let mut m = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for i in 0..250 {
        let file = format!("src/module_{}.py", i % 7);
        m.push(json!({"role": "assistant",
            "content": format!("Editing {file}.{}", state(json!({"assert": {"current_file": file}}))),
            "tool_calls": [{"id": format!("call_{i}"), "type": "function",
                "function": {"name": "open", "arguments": json!({"path": file}).to_string()}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"),
            "content": format!("[File: {file}]\n1: def f_{i}():\n2:     return {i}\n")}));
    }
    m
}

#[test]
fn retiring_a_turn_with_tool_calls_never_orphans_its_results() {
    let session = coding_session();
    for p in PRESETS {
        let c = run(&session, p);
        let report = c.chat.as_ref().unwrap();
        assert!(
            report.validation.ok,
            "{p:?}: {:?}",
            report.validation.new_violations
        );
        let output = out(&c);
        let results = output.iter().filter(|m| m["role"] == "tool").count();
        let calls: usize = output
            .iter()
            .map(|m| m["tool_calls"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!((calls, results), (250, 250), "{p:?}");
    }
}

#[test]
fn error_keywords_from_any_role_are_never_replaced_with_resolved() {
    let messages = [
        json!({"role": "system", "content": "Report every error you see."}),
        json!({"role": "user", "content": "I got an error: KeyError 'id' when I ran it."}),
        json!({"role": "assistant", "content": "That error means the id is missing."}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "run", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "c", "content": "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'id'"}),
        json!({"role": "user", "content": "Still failing with the same error."}),
    ];
    for p in PRESETS {
        let c = run(&messages, p);
        assert!(!c.output.to_lowercase().contains("resolved"), "{p:?}");
        assert!(
            c.decisions.iter().all(|d| d.action == Action::Keep),
            "{p:?}"
        );
        let input: Vec<Value> = messages.to_vec();
        assert_eq!(out(&c), input);
    }
}

#[test]
fn long_text_is_never_cut_to_its_first_and_last_characters() {
    let policy = "Rule: confirm every change with the user before acting. ".repeat(60);
    let story = "The user explains their itinerary in great detail. ".repeat(60);
    let rows: Vec<Value> = (0..40)
        .map(|i| json!({"name": format!("Item {i}"), "price": i, "stock": 3, "supplier": "ACME", "allergens": [], "notes": "none"}))
        .collect();
    let diff: Vec<String> = std::iter::once("diff --git a/x b/x".to_string())
        .chain((0..120).map(|i| format!("+line {i}")))
        .collect();
    let messages = [
        json!({"role": "system", "content": policy}),
        json!({"role": "user", "content": story}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "list", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "git_diff", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "a", "content": Value::Array(rows).to_string()}),
        json!({"role": "tool", "tool_call_id": "b", "content": diff.join("\n")}),
    ];
    for p in PRESETS {
        let c = run(&messages, p);
        let o = out(&c);
        assert_eq!(
            o[0]["content"],
            policy.as_str(),
            "system prompt untouched ({p:?})"
        );
        assert_eq!(
            o[1]["content"],
            story.as_str(),
            "user text untouched ({p:?})"
        );
        // Rows keep every field: sampled or not, each shown row is a whole original row.
        let list = o[3]["content"].as_str().unwrap();
        let body = list.split_once('\n').map_or(list, |(_, b)| b);
        let rows = decode_tables(&from_plain(body).unwrap());
        for row in rows.as_array().unwrap() {
            assert_eq!(row.as_object().unwrap().len(), 6, "{p:?}");
        }
        // A diff is never reduced to its first line.
        let d = o[4]["content"].as_str().unwrap();
        assert!(d.contains("+line 0") && d.contains("+line 119"), "{p:?}");
    }
}

#[test]
fn list_content_is_read_not_a_crash() {
    let openai = json!([
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A chart."}, {"type": "refusal", "refusal": "no"}]}
    ]);
    let c = compile(&openai.to_string(), &Options::default()).unwrap();
    assert_eq!(out(&c), openai.as_array().unwrap().clone());
    let anthropic = json!({"system": [{"type": "text", "text": "Be brief."}], "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A chart."}]}
    ]});
    let c = compile(&anthropic.to_string(), &Options::default()).unwrap();
    let v: Value = serde_json::from_str(&c.output).unwrap();
    assert_eq!(v, anthropic);
}

#[test]
fn pin_and_assert_with_the_same_value_in_one_block_keeps_the_pin() {
    let c = run(
        &[
            json!({"role": "assistant", "content": state(json!({"assert": {"allergy": "peanut"}, "pin": {"allergy": "peanut"}}))}),
            json!({"role": "assistant", "content": state(json!({"assert": {"allergy": "none"}}))}),
        ],
        Preset::Default,
    );
    let reg = &c.chat.as_ref().unwrap().register;
    assert_eq!(reg[0].value, "peanut");
    assert_eq!(format!("{:?}", reg[0].status), "Pinned");
}

#[test]
fn revoke_keys_are_normalised_like_other_keys() {
    let c = run(
        &[
            json!({"role": "assistant", "content": state(json!({"assert": {"Delivery Address": "Gate 2"}}))}),
            json!({"role": "assistant", "content": state(json!({"revoke": ["delivery-address"]}))}),
        ],
        Preset::Default,
    );
    assert!(c.chat.as_ref().unwrap().register.is_empty());
}

#[test]
fn the_fact_cap_applies_before_the_output_is_built() {
    let c = compile(
        &json!([{"role": "assistant", "content": state(json!({"assert": {"a": 1, "b": 2, "c": 3}}))}]).to_string(),
        &Options {
            chat: ChatOptions {
                max_keys: 2,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(c.chat.as_ref().unwrap().register.len(), 2);
    assert!(
        !c.output.contains("- c = 3"),
        "what the report rejected is not in the output"
    );
}

#[test]
fn safety_signals_are_words_in_rows_and_lines_and_pii_rows_say_so() {
    let rows: Vec<Value> = (0..20)
        .map(|i| match i {
            12 => json!({"name": "Egg-free muffins", "label": "egg-free"}),
            14 => json!({"name": "Nut mix", "label": "contains tree nut allergens"}),
            16 => json!({"name": "Ada Lovelace", "label": "passenger", "dob": "1815-12-10"}),
            _ => json!({"name": format!("Item {i}"), "label": "plain"}),
        })
        .collect();
    let mut log: Vec<String> = (0..100).map(|i| format!("step {i} ok")).collect();
    log[70] = "WARNING: disk almost full".into();
    log[72] = "built egg-free-pkg ok".into();
    let messages = [
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "list", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "build", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "a", "content": Value::Array(rows).to_string()}),
        json!({"role": "tool", "tool_call_id": "b", "content": log.join("\n")}),
        // The agent has read both outputs whole: they may be sampled and folded now.
        json!({"role": "assistant", "content": "Read both."}),
    ];
    let c = run(&messages, Preset::Aggressive);
    let o = out(&c);
    let list = o[1]["content"].as_str().unwrap();
    assert!(list.contains("Nut mix"));
    assert!(list.contains("Ada Lovelace"));
    assert!(list.contains("17 (dob, holds PII)"), "{list}");
    assert!(
        !list.contains("Egg-free muffins"),
        "egg-free is not an allergen: {list}"
    );
    let text = o[2]["content"].as_str().unwrap();
    assert!(
        text.contains("WARNING: disk almost full"),
        "text outputs keep their signals too"
    );
    assert!(!text.contains("egg-free-pkg"));
}

#[test]
fn an_assistant_paraphrase_never_supersedes_the_users_words() {
    let c = run(
        &[
            json!({"role": "user", "content": "My reservation is 0U4NPP and I fly economy."}),
            json!({"role": "assistant", "content": format!("Noted: 0U4NPP, economy.{}", state(json!({"assert": {"active_reservation": "0U4NPP", "cabin_class": "economy"}})))}),
            json!({"role": "assistant", "content": format!("Upgraded.{}", state(json!({"assert": {"active_reservation": "0U4NPP", "cabin_class": "business"}})))}),
        ],
        Preset::Aggressive,
    );
    assert_eq!(c.decisions[0].action, Action::Keep);
    assert_eq!(c.decisions[1].reason, Some(Reason::SupersededFact));
}

#[test]
fn a_live_session_keeps_state_between_calls() {
    // Appending to a Session and compiling again gives what a batch compile gives, so a
    // caller never recompiles the whole history per request.
    let text = Value::Array(coding_session()[..60].to_vec()).to_string();
    let items = lower_messages(&text).unwrap();
    let config = ChatConfig::default();
    let mut live = Session::with_passes(Default::default(), chat_pipeline(&config));
    let mut batch = Session::with_passes(Default::default(), chat_pipeline(&config));
    batch.extend(items.clone()).unwrap();
    batch.compile();
    for chunk in items.chunks(7) {
        live.extend(chunk.to_vec()).unwrap();
        live.compile();
    }
    assert_eq!(live.decisions(), batch.decisions());
}
