//! The `default` preset never hides what the agent has not seen or what nobody can recall,
//! checked on the public corpus the way an agent uses ctxgc: the history is compiled before
//! every assistant turn.
//!
//! - Without a recall tool, `default` makes no lossy rewrite (sampling, folding, projection)
//!   and reports what one would have saved (`would_save_tokens`).
//! - With one, lossy rewrites apply only to outputs an assistant turn already follows: the
//!   SWE-agent file window that `default` used to fold before the agent's next turn (which then
//!   used a line from the folded middle) is sent whole.

use ctxgc_core::chat::Preset;
use ctxgc_core::frontend::{Conversation, lower_conversations};
use ctxgc_core::ir::{Kind, Role};
use ctxgc_core::{Action, Options, Reason, compile};

mod common;
use common::corpus;

const LOSSY: [Reason; 4] = [
    Reason::FoldText,
    Reason::SampleRows,
    Reason::Projection,
    Reason::SupersededRecord,
];

fn is_assistant(conversation: &Conversation, i: usize) -> bool {
    matches!(&conversation.items[i].kind, Kind::Message(m) if m.role == Role::Assistant)
}

/// The history before item `t`, as the agent sends it.
fn prefix(conversation: &Conversation, t: usize) -> String {
    let raws: Vec<&str> = conversation.items[..t]
        .iter()
        .map(|i| i.raw.as_str())
        .collect();
    format!("[{}]", raws.join(",\n"))
}

fn options(conversation: &Conversation, preset: Preset, recall: bool) -> Options {
    let mut options = Options {
        from: Some(conversation.format),
        ..Options::default()
    };
    options.chat.preset = preset;
    options.chat.expand_tool = recall.then(|| "ctxgc_recall".to_owned());
    options
}

/// Every request of every conversation of `file`: `(conversation, t)` with an assistant turn
/// at `t` and history before it.
fn requests(conversations: &[Conversation]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (c, conversation) in conversations.iter().enumerate() {
        for t in 1..conversation.items.len() {
            if is_assistant(conversation, t) {
                out.push((c, t));
            }
        }
    }
    out
}

#[test]
fn swe_agent_file_windows_are_never_folded_before_the_agent_has_read_them() {
    let Some(text) = corpus("swe-agent-trajectories.jsonl") else {
        return;
    };
    let conversations = lower_conversations(&text, &Options::default()).expect("corpus lowers");
    let mut withheld_requests = 0;
    let mut folded_answered = 0;
    let mut unanswered_sent_whole = 0;
    for (c, t) in requests(&conversations) {
        let conversation = &conversations[c];
        let history = prefix(conversation, t);
        let last_assistant = (0..t).rev().find(|&i| is_assistant(conversation, i));

        // Default without a recall tool: nothing lossy, and what it would save is said.
        let plain = compile(&history, &options(conversation, Preset::Default, false))
            .expect("prefix compiles");
        for d in &plain.decisions {
            assert!(
                !d.reason.is_some_and(|r| LOSSY.contains(&r)),
                "{} before {}: {} {:?} without a recall tool",
                conversation.id,
                conversation.items[t].id,
                d.id,
                d.reason
            );
        }
        if plain.would_save_tokens > 0 {
            withheld_requests += 1;
        }

        // With a recall tool: lossy rewrites only on outputs an assistant turn follows.
        for preset in [Preset::Default, Preset::Aggressive] {
            let recall =
                compile(&history, &options(conversation, preset, true)).expect("prefix compiles");
            assert_eq!(
                recall.would_save_tokens, 0,
                "nothing is withheld with recall"
            );
            for (i, d) in recall.decisions.iter().enumerate() {
                let lossy = d.reason.is_some_and(|r| LOSSY.contains(&r));
                let answered = last_assistant.is_some_and(|a| a > i);
                if lossy {
                    assert!(
                        answered,
                        "{} before {}: {} folded before the agent answered it",
                        conversation.id, conversation.items[t].id, d.id
                    );
                    assert!(
                        recall
                            .output
                            .contains(&format!("ctxgc_recall with id \\\"{}\\\"", d.id)),
                        "a lossy rewrite names how to recall {}",
                        d.id
                    );
                    folded_answered += 1;
                } else if !answered && d.action == Action::Keep {
                    unanswered_sent_whole += 1;
                }
            }
        }
    }
    // The corpus has long outputs: without recall their folds are withheld and reported; with
    // recall they are folded once answered; the newest outputs always go whole.
    assert!(withheld_requests > 0, "some fold was withheld and reported");
    assert!(
        folded_answered > 0,
        "answered long outputs are folded with recall"
    );
    assert!(unanswered_sent_whole > 0);
}

#[test]
fn the_issue_case_a_fresh_file_window_goes_whole_and_is_folded_only_after_the_answer() {
    let Some(text) = corpus("swe-agent-trajectories.jsonl") else {
        return;
    };
    let conversations = lower_conversations(&text, &Options::default()).expect("corpus lowers");
    // A tool output of more than 150 lines (the default fold threshold) directly before an
    // assistant turn: the request carrying it is the one in which the agent reads it.
    let mut checked = 0;
    for (c, t) in requests(&conversations) {
        let conversation = &conversations[c];
        let last = &conversation.items[t - 1];
        let Kind::Message(m) = &last.kind else {
            continue;
        };
        if m.role != Role::Tool || last.raw.matches("\\n").count() <= 150 {
            continue;
        }
        let recall = options(conversation, Preset::Default, true);
        let before = compile(&prefix(conversation, t), &recall).expect("compiles");
        let decision = before
            .decisions
            .iter()
            .find(|d| d.id == last.id)
            .expect("a decision for the output");
        assert_ne!(
            decision.reason,
            Some(Reason::FoldText),
            "{}: {} folded before the agent's turn {}",
            conversation.id,
            last.id,
            conversation.items[t].id
        );
        // Once the agent has answered, the same output may be folded (it can be recalled).
        let after = compile(&prefix(conversation, t + 1), &recall).expect("compiles");
        let later = after
            .decisions
            .iter()
            .find(|d| d.id == last.id)
            .expect("a decision for the output");
        if later.reason == Some(Reason::FoldText) {
            checked += 1;
        }
    }
    assert!(checked > 0, "the corpus has fresh long file windows");
}

#[test]
fn default_without_recall_is_lossless_on_the_tau_corpora_and_reports_what_it_withheld() {
    for name in [
        "tau-bench-airline-gpt4o.jsonl",
        "tau2-bench-fork-grok.jsonl",
        "toolbench-examples.jsonl",
    ] {
        let Some(text) = corpus(name) else {
            return;
        };
        let lines: String = text.lines().take(40).map(|l| format!("{l}\n")).collect();
        let default = compile(&lines, &Options::default()).expect("compiles");
        let mut recall = Options::default();
        recall.chat.expand_tool = Some("ctxgc_recall".into());
        let with_recall = compile(&lines, &recall).expect("compiles");
        assert!(
            default
                .decisions
                .iter()
                .all(|d| !d.reason.is_some_and(|r| LOSSY.contains(&r))),
            "{name}: a lossy rewrite without a recall tool"
        );
        assert!(default.tokens_after <= default.tokens_before);
        // What default withheld is what the recall configuration removes beyond it.
        let lossy_with_recall = with_recall
            .decisions
            .iter()
            .filter(|d| d.reason.is_some_and(|r| LOSSY.contains(&r)))
            .count();
        assert_eq!(
            default.would_save_tokens > 0,
            lossy_with_recall > 0,
            "{name}: would_save {} vs {lossy_with_recall} lossy rewrites with recall",
            default.would_save_tokens
        );
        if lossy_with_recall > 0 {
            assert!(with_recall.tokens_after < default.tokens_after, "{name}");
        }
    }
}
