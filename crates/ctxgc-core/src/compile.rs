//! The front door: text in, compiled output and its report out.

use serde::Serialize;

use crate::error::{Diagnostic, Error};
use crate::frontend::detect;
use crate::frontend::events::{EventOptions, lower_events};
use crate::ir::{Format, Item};
use crate::plan::{Action, Decision, Reason};
use crate::render::prompt;
use crate::session::{RetentionPolicy, Session};
use crate::tokens::Tokenizer;

/// Everything a compilation can be told.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Force the input format instead of detecting it.
    pub from: Option<Format>,
    /// What protects items.
    pub retention: RetentionPolicy,
    /// Event front-end options.
    pub events: EventOptions,
    /// Which vocabulary counts tokens.
    pub tokenizer: Tokenizer,
    /// Chat options: preset, schema, protected tools, output format.
    pub chat: crate::chat::ChatOptions,
    /// Whether the report carries token counts. Decisions never depend on it: the passes
    /// that compare costs count what they compare either way.
    pub counting: Counting,
    /// A learned or reviewed projection that trims tool outputs on arrival (chats and event
    /// traces); its stubs name `chat.expand_tool` when one is set, and `chat.keep_tools` are
    /// never trimmed.
    pub projection: Option<crate::projection::Projection>,
}

/// Whether a compile reports exact token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Counting {
    /// `tokens_before`, `tokens_after` and (for chats) the per-payload and register counts
    /// are exact.
    #[default]
    Exact,
    /// For a caller that only wants the output: the report's counts are left at 0 and the
    /// input and output are never tokenized for them.
    ///
    /// ```
    /// use ctxgc_core::{compile, Counting, Options};
    /// let trace = r#"[{"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 1}]"#;
    /// let options = Options { counting: Counting::Skip, ..Default::default() };
    /// let out = compile(trace, &options).unwrap();
    /// assert_eq!((out.tokens_before, out.tokens_after), (0, 0));
    /// assert_eq!(out.output, compile(trace, &Options::default()).unwrap().output);
    /// ```
    Skip,
}

impl Counting {
    /// `count()` when counting, else 0.
    pub fn count(self, count: impl FnOnce() -> usize) -> usize {
        match self {
            Counting::Exact => count(),
            Counting::Skip => 0,
        }
    }
}

impl Options {
    /// The projection pass's configuration, when a projection is set.
    pub fn projection_config(&self) -> Option<crate::passes::projection::ProjectionConfig> {
        self.projection
            .as_ref()
            .map(|projection| crate::passes::projection::ProjectionConfig {
                projection: projection.clone(),
                recall_tool: self.chat.expand_tool.clone(),
                keep_tools: self.chat.keep_tools.clone(),
                withhold: crate::chat::withholds_lossy(&self.chat),
            })
    }
}

/// The receipt of one retired or rewritten item: its original is recoverable by id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    /// The item's id.
    pub id: String,
    /// retire or rewrite.
    pub action: Action,
    /// Why.
    pub reason: Reason,
    /// What replaced it or justified it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    /// blake3 of the original bytes (the receipt store's content address).
    pub hash: String,
    /// Size of the original in bytes.
    pub bytes: usize,
}

/// A compiled input.
#[derive(Debug, Clone, Serialize)]
pub struct Compiled {
    /// The input format (and so the output format).
    pub format: Format,
    /// What the model receives.
    pub output: String,
    /// Exact tokens of the input rendered without compaction.
    pub tokens_before: usize,
    /// Exact tokens of `output`.
    pub tokens_after: usize,
    /// Tokens that lossy rewrites withheld for want of a recall tool (the `default` preset
    /// without `expand_tool`: sampling, folding, a projection) would have saved on outputs the
    /// agent has answered, measured against what was sent instead. 0 when none was withheld.
    #[serde(skip_serializing_if = "is_zero")]
    pub would_save_tokens: usize,
    /// The tokenizer that counted.
    pub tokenizer: &'static str,
    /// One decision per item, in input order.
    pub decisions: Vec<Decision>,
    /// One receipt per retired or rewritten item.
    pub receipts: Vec<Receipt>,
    /// Problems that did not stop compilation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Diagnostic>,
    /// For chats: register, declarations, orphan check, tokens per payload, validation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat: Option<crate::chat::compile::ChatReport>,
    /// For JSONL of conversation records: each record's own report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<crate::chat::compile::RecordCompiled>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// An empty event-trace [`Session`] configured by `options`: retention, the event passes (with
/// a projection when one is given) and, under `cache-stable`, the prompt-cache model. Every
/// place that compiles an event trace (a file, a stored session, the console) starts here, so
/// they all decide alike.
///
/// ```
/// let mut options = ctxgc_core::Options::default();
/// options.chat.cache = Some(ctxgc_core::session::CacheModel::default());
/// let session = ctxgc_core::compile::event_session_template(&options);
/// assert_eq!(session.cache_boundary(), Some(0));
/// ```
pub fn event_session_template(options: &Options) -> Session {
    let mut session = Session::with_passes(
        options.retention.clone(),
        crate::passes::event_pipeline_with(options.projection_config()),
    );
    if let Some(model) = &options.chat.cache {
        session.enable_cache_stable(crate::session::CacheModel {
            tokenizer: options.tokenizer,
            ..model.clone()
        });
    }
    session
}

/// Lowers an event trace into a compiled [`Session`].
pub fn compile_event_session(text: &str, options: &Options) -> Result<Session, Error> {
    let items = lower_events(text, &options.events)?;
    let mut session = event_session_template(options);
    session.extend(items)?;
    session.compile();
    Ok(session)
}

/// The format of an input, as forced by options or detected.
pub fn input_format(text: &str, options: &Options) -> Result<Format, Error> {
    match options.from {
        Some(f) => Ok(f),
        None => Ok(detect(text)?.format),
    }
}

/// Compiles an input in any supported format.
///
/// ```
/// use ctxgc_core::{compile, Options};
/// let trace = r#"[
///   {"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10},
///   {"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 20}
/// ]"#;
/// let out = compile(trace, &Options::default()).unwrap();
/// assert_eq!(out.output, "[receipt e1: superseded by e2]\n[e2] x = 20\n");
/// assert_eq!(out.receipts[0].id, "e1");
/// ```
pub fn compile(text: &str, options: &Options) -> Result<Compiled, Error> {
    match input_format(text, options)? {
        Format::Events => {
            let session = compile_event_session(text, options)?;
            Ok(report_events_counting(
                &session,
                options.tokenizer,
                options.counting,
            ))
        }
        Format::OpenaiChat | Format::Anthropic | Format::Responses => {
            crate::chat::compile::compile_chat(text, options)
        }
        other => Err(Error::UnknownFormat(format!(
            "{} input is not supported yet",
            other.name()
        ))),
    }
}

/// Builds the report of a compiled event session, with exact token counts.
pub fn report_events(session: &Session, tokenizer: Tokenizer) -> Compiled {
    report_events_counting(session, tokenizer, Counting::Exact)
}

/// [`report_events`], counting tokens only when `counting` asks for it.
pub fn report_events_counting(
    session: &Session,
    tokenizer: Tokenizer,
    counting: Counting,
) -> Compiled {
    let plans = session.plans();
    let rendered = prompt::render_planned(session, &plans);
    let tokens_before = counting.count(|| {
        let before: String = session
            .render_order()
            .into_iter()
            .map(|i| &session.items()[i])
            .filter(|item| !matches!(item.kind, crate::ir::Kind::EdgeInjection { .. }))
            .map(prompt::event_line)
            .collect();
        tokenizer.count(&before)
    });
    let tokens_after = counting.count(|| tokenizer.count(&rendered.text));
    let decisions = session.decisions_of(&plans);
    let receipts = receipts_for(session.items(), &decisions);
    Compiled {
        format: Format::Events,
        tokens_before,
        tokens_after,
        would_save_tokens: session.would_save_tokens(),
        output: rendered.text,
        tokenizer: tokenizer.name(),
        decisions,
        receipts,
        warnings: session.warnings().to_vec(),
        chat: None,
        records: Vec::new(),
    }
}

/// Receipts for every retired or rewritten item.
pub fn receipts_for(items: &[Item], decisions: &[Decision]) -> Vec<Receipt> {
    items
        .iter()
        .zip(decisions)
        .filter(|(_, d)| d.action != Action::Keep)
        .filter_map(|(item, d)| {
            Some(Receipt {
                id: d.id.clone(),
                action: d.action,
                reason: d.reason?,
                by: d.by.clone(),
                hash: blake3::hash(item.raw.as_bytes()).to_hex().to_string(),
                bytes: item.raw.len(),
            })
        })
        .collect()
}

/// The original bytes of the item with `id`, and what was decided for it.
///
/// ```
/// use ctxgc_core::{receipt, Options};
/// let trace = "{\"id\":\"e1\",\"type\":\"set_var\",\"timestamp\":1,\"key\":\"x\",\"value\":1}\n\
///              {\"id\":\"e2\",\"type\":\"set_var\",\"timestamp\":2,\"key\":\"x\",\"value\":2}";
/// let (raw, decision) = receipt(trace, &Options::default(), "e1").unwrap();
/// assert_eq!(raw, r#"{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":1}"#);
/// assert_eq!(decision.reason.unwrap().code(), "superseded-var");
/// ```
pub fn receipt(text: &str, options: &Options, id: &str) -> Result<(String, Decision), Error> {
    match input_format(text, options)? {
        Format::Events => {
            let session = compile_event_session(text, options)?;
            let i = session
                .position(id)
                .ok_or_else(|| Error::Usage(format!("no item with id {id:?} in the input")))?;
            Ok((session.items()[i].raw.clone(), session.decision(i)))
        }
        Format::OpenaiChat | Format::Anthropic | Format::Responses => {
            crate::chat::compile::receipt(text, options, id)
        }
        other => Err(Error::UnknownFormat(format!(
            "{} input is not supported yet",
            other.name()
        ))),
    }
}

/// The input rendered without compaction, and the compiled output, for diffing.
pub fn before_after(text: &str, options: &Options) -> Result<(String, String), Error> {
    match input_format(text, options)? {
        Format::Events => {
            let session = compile_event_session(text, options)?;
            let before: String = session
                .render_order()
                .into_iter()
                .map(|i| &session.items()[i])
                .filter(|item| !matches!(item.kind, crate::ir::Kind::EdgeInjection { .. }))
                .map(prompt::event_line)
                .collect();
            Ok((before, prompt::render(&session).text))
        }
        Format::OpenaiChat | Format::Anthropic | Format::Responses => {
            crate::chat::compile::before_after(text, options)
        }
        other => Err(Error::UnknownFormat(format!(
            "{} input is not supported yet",
            other.name()
        ))),
    }
}
