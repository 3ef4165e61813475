//! Cache-stable compilation of chats: between compaction steps, each output is a byte-identical
//! prefix of the next; steps are a pure function of the session so far.

use ctxgc_core::chat::compile::compile_chat;
use ctxgc_core::session::CacheModel;
use ctxgc_core::{Compiled, Options};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};

mod common;
use common::tracegc_fixtures;

/// A deterministic random chat: lookups repeated (same or changed results), bulky JSON lists,
/// long logs, and state declarations.
fn session(seed: u64, turns: usize) -> Vec<Value> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n.max(1)
    };
    let mut messages =
        vec![json!({"role": "system", "content": "You are a support agent. Follow the policy."})];
    for t in 0..turns {
        messages.push(
            json!({"role": "user", "content": format!("Request {t}: check order {}", next(4))}),
        );
        let tool = ["get_order", "list_flights", "read_log"][next(3) as usize];
        let arg = next(3);
        let id = format!("call_{t}");
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": tool, "arguments": json!({"id": arg}).to_string()}}]}));
        let version = next(2);
        let output = match tool {
            "list_flights" => json!({"flights": (0..40).map(|r| json!({
                "flight": format!("HAT{r:03}"), "price": 100 + r * 7 + version, "seats": r % 9,
                "status": "available", "aircraft": "A320"})).collect::<Vec<_>>()}).to_string(),
            "read_log" => (0..200).map(|l| format!("line {l}: ok v{version}\n")).collect(),
            _ => json!({"order": arg, "status": if version == 0 { "pending" } else { "shipped" }, "items": [
                {"sku": "A1", "qty": 1}, {"sku": "B2", "qty": 2}]}).to_string(),
        };
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
        let state = if next(3) == 0 {
            format!(
                "<contextgc-state>{{\"assert\": {{\"order\": \"{}\"}}}}</contextgc-state>",
                next(4)
            )
        } else {
            String::new()
        };
        messages.push(json!({"role": "assistant", "content": format!("Checked ({t}).{state}")}));
    }
    messages
}

fn options() -> Options {
    let mut options = Options::default();
    options.chat.cache = Some(CacheModel {
        min_reclaim_tokens: 300,
        ..CacheModel::default()
    });
    options
}

fn messages_of(compiled: &Compiled) -> Vec<String> {
    let list: Vec<Box<RawValue>> = serde_json::from_str(&compiled.output).expect("a message list");
    list.into_iter().map(|m| m.get().to_owned()).collect()
}

fn steps_of(compiled: &Compiled) -> usize {
    compiled
        .chat
        .as_ref()
        .and_then(|c| c.compaction_steps.as_ref())
        .map_or(0, Vec::len)
}

/// Compiles every prefix statelessly; checks prefix stability between steps. Returns the
/// number of steps seen.
fn check_prefixes(messages: &[Value]) -> usize {
    let options = options();
    let mut previous: Option<(Vec<String>, usize)> = None;
    for k in 1..=messages.len() {
        let text = Value::Array(messages[..k].to_vec()).to_string();
        let compiled = compile_chat(&text, &options).expect("compiles");
        let now = messages_of(&compiled);
        let steps = steps_of(&compiled);
        if let Some((before, before_steps)) = &previous {
            assert!(steps >= *before_steps, "steps never disappear");
            if steps == *before_steps {
                assert!(now.len() >= before.len());
                assert_eq!(
                    &now[..before.len()],
                    &before[..],
                    "prefix {k}: earlier output changed without a step"
                );
            }
        }
        previous = Some((now, steps));
    }
    previous.map_or(0, |(_, s)| s)
}

#[test]
fn a_long_session_takes_steps_and_stays_stable_between_them() {
    let messages = session(7, 30);
    let steps = check_prefixes(&messages);
    assert!(steps >= 1, "repeated bulky reads make a step worth it");
    let compiled = compile_chat(&Value::Array(messages.clone()).to_string(), &options()).unwrap();
    for step in compiled.chat.unwrap().compaction_steps.unwrap() {
        assert!(step.estimated_net > 0.0);
        assert!(step.tokens_saved >= 300);
        assert!(!step.items.is_empty());
    }
}

#[test]
fn eager_compilation_rewrites_history_cache_stable_does_not() {
    // The same session with the default preset changes earlier messages as later ones arrive
    // (a superseded read is stubbed); the cache-stable one only at steps.
    let messages = session(11, 20);
    let mut changed_without_step = 0;
    let mut previous: Option<Vec<String>> = None;
    for k in 1..=messages.len() {
        let text = Value::Array(messages[..k].to_vec()).to_string();
        let now = messages_of(&compile_chat(&text, &Options::default()).unwrap());
        if let Some(before) = &previous
            && now[..before.len().min(now.len())] != before[..before.len().min(now.len())]
        {
            changed_without_step += 1;
        }
        previous = Some(now);
    }
    assert!(changed_without_step > 0, "the eager preset edits history");
    check_prefixes(&messages);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn random_sessions_are_prefix_stable_between_steps(seed in any::<u64>(), turns in 2usize..14) {
        check_prefixes(&session(seed, turns));
    }
}

/// Event traces under cache-stable: appended one event at a time, every rendered prompt is a
/// byte-identical prefix of the next until a compaction step is taken; batch and live agree.
#[test]
fn event_traces_are_prefix_stable_between_steps() {
    use ctxgc_core::compile::{compile_event_session, event_session_template};
    use ctxgc_core::frontend::events::{EventOptions, lower_events};
    use ctxgc_core::render::prompt;

    let mut options = Options::default();
    options.chat.cache = Some(CacheModel {
        min_reclaim_tokens: 20,
        ..CacheModel::default()
    });
    let mut total_steps = 0;
    let mut eager_edits = 0;
    for (name, text) in tracegc_fixtures() {
        let items = lower_events(&text, &EventOptions::default()).expect("fixture lowers");
        let mut live = event_session_template(&options);
        let mut eager = ctxgc_core::Session::with_passes(
            options.retention.clone(),
            ctxgc_core::passes::event_pipeline(),
        );
        let mut previous: Option<(String, usize)> = None;
        let mut previous_eager = String::new();
        for item in items {
            live.extend(vec![item.clone()]).expect("appends");
            live.compile();
            eager.extend(vec![item]).expect("appends");
            eager.compile();
            let now = prompt::render(&live).text;
            let steps = live.compaction_steps().len();
            if let Some((before, before_steps)) = &previous
                && steps == *before_steps
            {
                assert!(
                    now.starts_with(before.as_str()),
                    "{name}: earlier prompt changed without a step:\n--- before\n{before}\n--- now\n{now}"
                );
            }
            let eager_now = prompt::render(&eager).text;
            if !eager_now.starts_with(previous_eager.as_str()) {
                eager_edits += 1;
            }
            previous_eager = eager_now;
            previous = Some((now, steps));
        }
        total_steps += live.compaction_steps().len();
        for step in live.compaction_steps() {
            assert!(step.estimated_net > 0.0, "{name}: a step that does not pay");
            assert!(!step.items.is_empty());
        }
        // The whole trace compiled at once is the live session's last prompt.
        let batch = compile_event_session(&text, &options).expect("compiles");
        assert_eq!(
            batch.compaction_steps(),
            live.compaction_steps(),
            "{name}: batch and live step differently"
        );
        assert_eq!(
            prompt::render(&batch).text,
            previous.map(|(t, _)| t).unwrap_or_default(),
            "{name}: batch and live differ"
        );
    }
    assert!(eager_edits > 0, "the eager renderer edits earlier text");
    assert!(total_steps > 0, "some fixture is worth a compaction step");
}

/// What a stateless caller sees (the bench, a gateway): every prefix of a TraceGC fixture
/// compiled on its own under the default cache model; until a compaction step is taken each
/// prompt extends the last one byte for byte.
#[test]
fn stateless_event_prefixes_extend_each_other() {
    use ctxgc_core::compile::compile_event_session;
    use ctxgc_core::render::prompt;

    let mut options = Options::default();
    options.chat.cache = Some(CacheModel::default());
    for (name, text) in tracegc_fixtures() {
        let events = match serde_json::from_str::<Value>(&text).expect("fixture is JSON") {
            Value::Object(mut o) => o.remove("events").expect("an events list"),
            list => list,
        };
        let events = events.as_array().expect("a list").clone();
        let mut previous = (String::new(), 0);
        for k in 1..=events.len() {
            let prefix = Value::Array(events[..k].to_vec()).to_string();
            let session = compile_event_session(&prefix, &options).expect("prefix compiles");
            let now = prompt::render(&session).text;
            let steps = session.compaction_steps().len();
            assert!(steps >= previous.1, "{name}: steps never disappear");
            if steps == previous.1 {
                assert!(
                    now.starts_with(&previous.0),
                    "{name}, prefix {k}: earlier prompt changed without a step:\n--- before\n{}\n--- now\n{now}",
                    previous.0
                );
            }
            // The library's front door gives the same prompt.
            assert_eq!(
                ctxgc_core::compile(&prefix, &options)
                    .expect("compiles")
                    .output,
                now
            );
            previous = (now, steps);
        }
    }
}

/// Every fact the agent declared, as the model reads it: from the register and from state
/// blocks still in messages (the last declaration of a key wins).
fn visible_state(output: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let list: Vec<Value> = serde_json::from_str(output).expect("a message list");
    for message in list {
        let text = message["content"].as_str().unwrap_or_default();
        for line in text.lines().filter(|l| l.starts_with("- ")) {
            seen.push(line.split(" (").next().unwrap_or(line).to_owned());
        }
        if let Some(start) = text.find("<contextgc-state>") {
            seen.push(text[start..].to_owned());
        }
    }
    seen
}

#[test]
fn a_declaration_stays_visible_until_a_step_moves_it_into_the_register() {
    // Stripping a state block on arrival while the register (in the cached prefix) waits for
    // a step would leave the model seeing the declaration nowhere.
    let messages = json!([
        {"role": "system", "content": "You book flights."},
        {"role": "user", "content": "Move me to business."},
        {"role": "assistant", "content": "Done.<contextgc-state>{\"assert\": {\"cabin\": \"business\"}}</contextgc-state>"},
        {"role": "user", "content": "Actually economy."},
        {"role": "assistant", "content": "Ok.<contextgc-state>{\"assert\": {\"cabin\": \"economy\"}}</contextgc-state>"},
        {"role": "user", "content": "Which cabin am I in?"}
    ]);
    let compiled = compile_chat(&messages.to_string(), &options()).expect("compiles");
    let visible = visible_state(&compiled.output);
    assert!(
        visible.iter().any(|s| s.contains("economy")),
        "the latest declaration is visible: {}",
        compiled.output
    );
    // The agent's own words are sent as it wrote them: text already sent stays a prefix.
    assert!(compiled.output.contains("Ok.<contextgc-state>"));
    let mut eager = options();
    eager.chat.cache = None;
    let eager = compile_chat(&messages.to_string(), &eager).expect("compiles");
    assert!(
        eager.output.contains("cabin = \\\"economy\\\""),
        "{}",
        eager.output
    );
    assert!(!eager.output.contains("<contextgc-state>"));
}
