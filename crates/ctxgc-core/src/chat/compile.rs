//! The compile path for chat inputs: lower, run the chat pipeline on a [`Session`], render,
//! and report (register with provenance, declarations rejected or untrusted, the orphan
//! check, tokens per payload, structural validation of the output).
//!
//! **What is counted as tokens** (exact BPE, [`crate::Tokenizer::count`]): for every message,
//! each piece of text the model reads, counted on its own and summed — text content (text
//! parts, refusals, thinking text), each tool call's name and its arguments as sent (the JSON
//! text of `function.arguments`, or compact JSON of an arguments object), and each tool
//! output's text (compact JSON when it is structured); the system prompt and the register
//! count like any message. Role names, ids, JSON punctuation, images and opaque items are not
//! counted. The same rule applies before and after.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::chat::lowering::{ChatDoc, lower_document};
use crate::chat::state::{Ledger, orphans};
use crate::chat::{ChatConfig, register, role_name};
pub use crate::compile::report::{
    ChatReport, OrphanCheck, PayloadTokens, RecordCompiled, RegisterEntry, Validation,
};
use crate::compile::{Compiled, Detail, Options, receipts_for};
use crate::error::Error;
use crate::formats::Format;
use crate::formats::Lowered;
use crate::formats::detect::chat_format_of_text;
use crate::formats::records::{Record, lower_records};
use crate::ir::Kind;
use crate::passes::chat_pipeline_with;
use crate::plan::Action;
use crate::render::messages::{self, RenderedChat, Source};
use crate::session::Session;
use crate::tokens::Tokenizer;
use crate::validate::{Violation, validate};

/// A chat input: one document, or records one per line.
#[derive(Debug, Clone)]
pub enum ChatInput {
    /// One document.
    Doc(ChatDoc),
    /// Records.
    Records(Vec<Record>),
}

/// A single object with a string `id` beside its `messages` is a conversation record (a
/// JSONL file of one line), named by its id like any other record.
fn is_record(text: &str) -> bool {
    let Ok(entries) =
        crate::chat::lowering::object_entries(text.trim_start_matches('\u{feff}').trim())
    else {
        return false;
    };
    entries.iter().any(|(k, _)| k == "messages")
        && entries
            .iter()
            .any(|(k, v)| k == "id" && v.get().trim_start().starts_with('"'))
}

fn is_single_document(text: &str) -> bool {
    serde_json::from_str::<&RawValue>(text.trim_start_matches('\u{feff}').trim()).is_ok()
}

/// Lowers a chat input (a document or records), format forced by `from` or detected.
pub fn lower_chat_input(text: &str, from: Option<Format>) -> Result<ChatInput, Error> {
    // A UTF-8 byte order mark (some editors write one) is not part of the document.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if is_single_document(text) && !is_record(text) {
        let format = match from {
            Some(f) => f,
            None => chat_format_of_text(text.trim_start_matches('\u{feff}').trim())?,
        };
        return Ok(ChatInput::Doc(lower_document(text, format)?));
    }
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let head: Value = serde_json::from_str(first).map_err(|e| Error::json("line 1", &e))?;
    if !head.get("messages").is_some_and(Value::is_array) {
        return Err(Error::UnknownFormat(
            "chat JSONL must hold one conversation record per line: {\"id\": ..., \"messages\": [...]}".into(),
        ));
    }
    Ok(ChatInput::Records(lower_records(text, from)?))
}

fn config_of(options: &Options) -> ChatConfig {
    ChatConfig::resolve(&options.chat, options.tokenizer)
}

/// An empty chat session configured by `options`: retention, the chat pipeline (with a
/// projection when one is given) and, under `cache-stable`, the prompt-cache model.
pub fn session_template(options: &Options) -> Session {
    crate::compile::configured_session(
        chat_pipeline_with(&config_of(options), options.projection_config()),
        options,
    )
}

/// Runs the chat pipeline over a lowered document.
pub fn session_of(doc: &ChatDoc, config: &ChatConfig, options: &Options) -> Result<Session, Error> {
    let mut session = crate::compile::configured_session(
        chat_pipeline_with(config, options.projection_config()),
        options,
    );
    session.extend(doc.items.clone())?;
    session.compile();
    Ok(session)
}

/// Lowers a chat input to its conversations, one document or one per record (the chat
/// formats' [`crate::formats::WireFormat::lower`]).
pub fn lower<'a>(text: &'a str, options: &Options) -> Result<Vec<Lowered<'a>>, Error> {
    Ok(match lower_chat_input(text, options.from)? {
        ChatInput::Doc(doc) => vec![Lowered {
            record: None,
            raw: Cow::Borrowed(text),
            doc,
        }],
        ChatInput::Records(records) => records
            .into_iter()
            .map(|r| Lowered {
                record: Some((r.id, r.line)),
                raw: Cow::Owned(r.raw),
                doc: r.doc,
            })
            .collect(),
    })
}

/// The texts of one message (or the Anthropic system value) that token counts cover.
pub fn payload_of(format: Format, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match value {
        Value::String(s) => out.push(s.clone()),
        _ => format.wire().payload(value, &mut out),
    }
    out
}

/// Tokens of one message's JSON text, by the rule in the module doc (remembered by content
/// hash, so a message is parsed and counted once however often its session is recompiled).
pub fn payload_tokens(format: Format, json: &str, tokenizer: Tokenizer) -> usize {
    tokenizer.count_derived(format.name(), json, || {
        match serde_json::from_str::<Value>(json) {
            Ok(v) => payload_of(format, &v)
                .iter()
                .map(|t| tokenizer.count(t))
                .sum(),
            Err(_) => 0,
        }
    })
}

/// Violations of `output` not already in `input`, compared by rule and call id.
fn new_violations(input: &[Violation], output: &[Violation]) -> Vec<Violation> {
    let mut budget: HashMap<_, usize> = HashMap::new();
    for v in input {
        *budget.entry(v.key()).or_default() += 1;
    }
    output
        .iter()
        .filter(|v| match budget.get_mut(&v.key()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

/// Puts a converted document back in the input's envelope: every field other than the
/// messages (and the system prompt, which conversion moves) keeps its bytes.
fn rewrap(doc: &ChatDoc, converted: &str, target: Format) -> Result<String, Error> {
    let crate::chat::lowering::Envelope::Object { entries, items_key } = &doc.envelope else {
        return Ok(converted.to_owned());
    };
    // A format whose document is a bare list goes under its items key; any other wrote
    // its own object.
    let new_entries: Vec<(String, String)> = if converted.trim_start().starts_with('[') {
        vec![(target.wire().items_key().to_owned(), converted.to_owned())]
    } else {
        crate::chat::lowering::object_entries(converted)
            .map_err(|e| Error::Usage(format!("conversion produced invalid JSON: {e}")))?
            .into_iter()
            .map(|(k, v)| (k, v.get().to_owned()))
            .collect()
    };
    let mut out = Vec::new();
    for (k, v) in entries {
        if k == items_key {
            out.extend(new_entries.iter().cloned());
        } else if doc.format.wire().system_key() == Some(k.as_str()) {
            // Moved into the converted messages (or the converted system).
        } else if !new_entries.iter().any(|(n, _)| n == k) {
            out.push((k.clone(), v.clone()));
        }
    }
    let mut text = String::from("{");
    for (n, (k, v)) in out.iter().enumerate() {
        if n > 0 {
            text.push(',');
        }
        text.push_str(&Value::String(k.clone()).to_string());
        text.push(':');
        text.push_str(v);
    }
    text.push('}');
    Ok(text)
}

/// Renders a compiled session in the requested format.
pub fn render_session(
    doc: &ChatDoc,
    session: &Session,
    register_text: Option<&str>,
    to: Option<Format>,
) -> Result<RenderedChat, Error> {
    match to {
        Some(t) if t != doc.format => {
            if !t.wire().is_chat() {
                return Err(Error::Usage(format!(
                    "--to {}: a chat can be written as openai-chat, anthropic or responses",
                    t.name()
                )));
            }
            let mut rendered = messages::convert(session, register_text, t)?;
            rendered.text = rewrap(doc, &rendered.text, t)?;
            Ok(rendered)
        }
        _ => messages::render(doc, session, register_text),
    }
}

/// Compiles one lowered document; `input` is its text (validated for comparison).
pub fn compile_doc(
    doc: &ChatDoc,
    input: &str,
    options: &Options,
) -> Result<(Compiled, Session), Error> {
    let config = config_of(options);
    let session = session_of(doc, &config, options)?;
    let compiled = report_doc(doc, input, &session, &config, options)?;
    Ok((compiled, session))
}

/// The report of a compiled chat conversation (the chat formats'
/// [`crate::formats::WireFormat::report`]).
pub fn report(
    lowered: &Lowered<'_>,
    session: &Session,
    options: &Options,
) -> Result<Compiled, Error> {
    report_doc(
        &lowered.doc,
        &lowered.raw,
        session,
        &config_of(options),
        options,
    )
}

/// The report of a compiled document; `input` is its text (validated for comparison).
fn report_doc(
    doc: &ChatDoc,
    input: &str,
    session: &Session,
    config: &ChatConfig,
    options: &Options,
) -> Result<Compiled, Error> {
    // In cache-stable mode the register sits in the stable prefix, so it shows the state as of
    // the last compaction step; later declarations reach it at the next step.
    let state_items = match session.cache_boundary() {
        Some(boundary) => &session.items()[..boundary],
        None => session.items(),
    };
    let ledger = Ledger::build(config.state.clone(), state_items);
    let facts = ledger.facts();
    let register_text = register::render(&facts);
    let target = options.chat.to.unwrap_or(doc.format);
    let rendered = render_session(doc, session, register_text.as_deref(), options.chat.to)?;
    let tokenizer = options.tokenizer;
    let counting = options.report_counting();
    let items = session.items();

    // The output's validity is checked whatever the detail: a broken output is a warning.
    // Only what the input did not already break is, so with a valid output and no report to
    // fill in, the input need not be validated again.
    let output_violations = validate(target, &rendered.text)?;
    let input_violations = if output_violations.is_empty() && options.detail == Detail::OutputOnly {
        Vec::new()
    } else {
        validate(doc.format, input)?
    };
    let fresh = new_violations(&input_violations, &output_violations);
    let mut warnings = session.warnings().to_vec();
    warnings.extend(rendered.warnings.iter().cloned());
    for v in &fresh {
        warnings.push(crate::error::Diagnostic::new(
            v.index,
            None,
            None,
            format!(
                "the output breaks a {:?} rule the input did not: {}",
                v.rule, v.detail
            ),
        ));
    }
    if options.detail == Detail::OutputOnly {
        return Ok(Compiled {
            format: target,
            output: rendered.text,
            tokens_before: 0,
            tokens_after: 0,
            would_save_tokens: session.would_save_tokens(),
            tokenizer: tokenizer.name(),
            decisions: Vec::new(),
            receipts: Vec::new(),
            warnings,
            chat: None,
            records: Vec::new(),
        });
    }

    // Tokens per payload. A message sent as its original bytes costs what it cost before.
    let before: Vec<usize> = items
        .iter()
        .map(|item| match item.kind {
            Kind::Message(_) => counting.count(|| payload_tokens(doc.format, &item.raw, tokenizer)),
            _ => 0,
        })
        .collect();
    let mut after = vec![0usize; items.len()];
    let mut tokens_after = 0;
    for m in &rendered.messages {
        let n = match m.source {
            Source::Item(i) if m.json == items[i].raw && target == doc.format => before[i],
            _ => counting.count(|| payload_tokens(target, &m.json, tokenizer)),
        };
        if let Source::Item(i) = m.source {
            after[i] += n;
        }
        tokens_after += n;
    }
    let decisions = session.decisions();
    let mut pairing = crate::chat::pairing::Pairing::default();
    for (i, item) in items.iter().enumerate() {
        pairing.add(i, item);
    }
    let untouched = |i: usize| -> Option<&'static str> {
        let mut calls = pairing.results_in(i).peekable();
        calls.peek()?;
        Some(
            if calls.any(|(_, c)| config.expand_tool.as_deref() == Some(c.name.as_str())) {
                "the recall tool's own output is never rewritten"
            } else if pairing
                .results_in(i)
                .any(|(_, c)| config.tool_protected(&c.name))
            {
                "protected by --keep-tool"
            } else if session.withheld_of(i) > 0 {
                "a lossy rewrite (sampling, folding, projection) was withheld: the model has no recall tool (--expand-tool) to get the omitted part back"
            } else {
                "no rewrite applies or would cost fewer tokens (below the preset's thresholds, or already compact)"
            },
        )
    };
    let payloads = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let Kind::Message(m) = &item.kind else {
                return None;
            };
            Some(PayloadTokens {
                id: item.id.clone(),
                role: role_name(m.role),
                action: decisions[i].action,
                reason: decisions[i].reason,
                before: before[i],
                after: after[i],
                untouched: if decisions[i].action == Action::Keep {
                    untouched(i)
                } else {
                    None
                },
            })
        })
        .collect();

    let retired = |i: usize| session.plan_of(i).action() == Action::Retire;
    let orphaned = orphans(&ledger, retired);
    let mut still_required = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let writes = ledger.writes_of(i);
        let supported: Vec<String> = facts
            .iter()
            .filter(|(_, f)| f.support == i && !f.carried)
            .map(|(k, _)| (*k).to_owned())
            .collect();
        let superseded = writes
            .iter()
            .any(|(k, _)| facts.get(k.as_str()).is_none_or(|f| f.support != i));
        if superseded && !supported.is_empty() && !retired(i) {
            still_required.push((item.id.clone(), supported));
        }
    }
    let register = facts
        .iter()
        .map(|(key, f)| RegisterEntry {
            key: (*key).to_owned(),
            value: f.value.clone(),
            status: f.status,
            support: f.provenance.clone(),
            carried: f.carried,
            flags: f.flags.clone(),
        })
        .collect();

    let report = ChatReport {
        preset: options.chat.preset,
        input_format: doc.format,
        register,
        register_tokens: register_text
            .as_deref()
            .map_or(0, |r| counting.count(|| tokenizer.count(r))),
        declarations: ledger.events().to_vec(),
        orphan_check: OrphanCheck {
            ok: orphaned.is_empty(),
            orphaned,
            still_required,
        },
        payloads,
        validation: Validation {
            ok: fresh.is_empty(),
            new_violations: fresh,
            input_violations,
        },
        compaction_steps: session
            .cache_boundary()
            .map(|_| session.compaction_steps().to_vec()),
    };
    let receipts = receipts_for(items, &decisions);
    let compiled = Compiled {
        format: target,
        output: rendered.text,
        tokens_before: before.iter().sum(),
        tokens_after,
        would_save_tokens: session.would_save_tokens(),
        tokenizer: tokenizer.name(),
        decisions,
        receipts,
        warnings,
        chat: Some(report),
        records: Vec::new(),
    };
    Ok(compiled)
}

/// The id a record's item has in an aggregate report: `<record id>#<item id>`.
pub fn record_item_id(record: &str, item: &str) -> String {
    format!("{record}#{item}")
}

/// Compiles a chat input; records are compiled one by one and gathered in one report (ids
/// `<record id>#<item id>`; `records` holds each record's own report). The chat formats
/// tell themselves apart while lowering, so this is [`crate::compile::compile`] without
/// detection.
pub fn compile_chat(text: &str, options: &Options) -> Result<Compiled, Error> {
    crate::compile::compile_with(Format::OpenaiChat.wire(), text, options)
}

fn transcript_entry(out: &mut String, id: &str, format: Format, json: &str) {
    let value: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    let role = value
        .get("role")
        .and_then(Value::as_str)
        .or_else(|| value.get("type").and_then(Value::as_str))
        .unwrap_or(if value.is_object() { "item" } else { "system" });
    out.push_str(&format!("### {id} {role}\n"));
    for piece in payload_of(format, &value) {
        out.push_str(&piece);
        if !piece.ends_with('\n') {
            out.push('\n');
        }
    }
}

/// The conversation as given and as compiled, as readable transcripts (one `### id role`
/// header per message, then its text), for diffing (the chat formats'
/// [`crate::formats::WireFormat::before_after`]).
pub fn transcripts(
    lowered: &Lowered<'_>,
    session: &Session,
    options: &Options,
    prefix: &str,
) -> Result<(String, String), Error> {
    let doc = &lowered.doc;
    let config = config_of(options);
    let mut before = String::new();
    let mut after = String::new();
    for item in session.items() {
        transcript_entry(
            &mut before,
            &format!("{prefix}{}", item.id),
            doc.format,
            &item.raw,
        );
    }
    let facts_ledger = Ledger::build(config.state.clone(), session.items());
    let register_text = register::render(&facts_ledger.facts());
    let rendered = render_session(doc, session, register_text.as_deref(), options.chat.to)?;
    let target = options.chat.to.unwrap_or(doc.format);
    for m in &rendered.messages {
        let id = match m.source {
            Source::Item(i) => session.items()[i].id.clone(),
            Source::Register => "register".to_owned(),
        };
        transcript_entry(&mut after, &format!("{prefix}{id}"), target, &m.json);
    }
    Ok((before, after))
}
