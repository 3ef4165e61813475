//! The engine merges every pass's claims per item and per block, so the chat passes are
//! stored one by one. Sessions stored when they ran as one group (`chat`) must load and
//! compile on exactly as a session that was never stored.

use ctxgc_core::Session;
use ctxgc_core::chat::Preset;
use ctxgc_core::chat::compile::session_template;
use serde_json::{Value, json};

mod common;

/// `session` as an earlier version stored it: its passes inside one `chat` group.
fn stored_as_a_group(session: &Session) -> Value {
    let mut stored = serde_json::to_value(session).expect("a session serialises");
    let passes = stored["passes"].take();
    assert!(
        passes.as_array().is_some_and(|p| p.len() > 1),
        "the chat pipeline is stored pass by pass: {passes}"
    );
    stored["passes"] = json!([{ "chat": { "passes": passes } }]);
    stored
}

#[test]
fn a_session_stored_with_its_chat_passes_grouped_compiles_on_alike() {
    let items = common::agent_chat_items(60);
    let (first, rest) = items.split_at(items.len() / 2);
    for preset in [Preset::Default, Preset::Aggressive, Preset::Lossless] {
        let template = session_template(&common::preset_options(preset));
        let mut never_stored = template.clone();
        never_stored.extend(first.to_vec()).expect("extends");
        never_stored.compile();

        let mut loaded: Session = serde_json::from_value(stored_as_a_group(&never_stored))
            .expect("a grouped pipeline loads");
        // Stored again, it is flat: the group was opened on load.
        assert!(
            serde_json::to_value(&loaded).expect("serialises")["passes"][0]
                .get("chat")
                .is_none()
        );
        for session in [&mut never_stored, &mut loaded] {
            session.extend(rest.to_vec()).expect("extends");
            session.compile();
        }
        assert_eq!(loaded.plans(), never_stored.plans(), "{preset:?}: plans");
        let decisions = loaded.decisions();
        assert_eq!(decisions, never_stored.decisions(), "{preset:?}: decisions");
        assert!(
            decisions.iter().filter(|d| d.reason.is_some()).count() > 10,
            "{preset:?}: the passes had work to do"
        );
    }
}
