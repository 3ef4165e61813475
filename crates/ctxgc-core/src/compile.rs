//! The front door: text in, compiled output and its report out.

use serde::Serialize;

use crate::chat::compile::{RecordCompiled, record_item_id};
use crate::error::{Diagnostic, Error};
use crate::formats::Format;
use crate::formats::events::{EventOptions, lower_events};
use crate::formats::{Lowered, WireFormat};
use crate::frontend::{detect, detect_and_split_unchecked};
use crate::ir::Item;
use crate::passes::AnyPass;
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
    /// How much of the report a compile fills in.
    pub detail: Detail,
}

/// How much of the report a compile fills in. The output is the same either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Detail {
    /// Decisions, receipts, and for chats the register, payloads and validation report.
    #[default]
    Full,
    /// For a caller that prints only the output (`ctxgc compile` without `--json` or
    /// `--dry-run`): `output`, `format` and `warnings` are filled in; `decisions`, `receipts`,
    /// `chat` and `records` are left empty, and nothing is tokenized for the report (as with
    /// [`Counting::Skip`]).
    ///
    /// ```
    /// use ctxgc_core::{compile, Detail, Options};
    /// let trace = r#"[{"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 1},
    ///                {"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 2}]"#;
    /// let full = compile(trace, &Options::default()).unwrap();
    /// let lean = compile(trace, &Options { detail: Detail::OutputOnly, ..Default::default() }).unwrap();
    /// assert_eq!(lean.output, full.output);
    /// assert_eq!(full.receipts.len(), 1);
    /// assert!(lean.decisions.is_empty() && lean.receipts.is_empty());
    /// ```
    OutputOnly,
}

impl Detail {
    /// The counting a report with this detail does, `asked` being what the caller asked for.
    pub fn counting(self, asked: Counting) -> Counting {
        match self {
            Detail::Full => asked,
            Detail::OutputOnly => Counting::Skip,
        }
    }
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
    /// The counting the report does: none when only the output is wanted.
    pub fn report_counting(&self) -> Counting {
        self.detail.counting(self.counting)
    }

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
    configured_session(
        crate::passes::event_pipeline_with(
            options.projection_config(),
            &crate::chat::ChatConfig::resolve(&options.chat, options.tokenizer),
        ),
        options,
    )
}

/// An empty [`Session`] running `passes`, with the retention and (under `cache-stable`) the
/// prompt-cache model of `options`.
pub fn configured_session(passes: Vec<AnyPass>, options: &Options) -> Session {
    let mut session = Session::with_passes(options.retention.clone(), passes);
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
    session_of(&mut Lowered::bare(Format::Events, text, items), options)
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
    let wire = match options.from {
        Some(forced) => forced.wire(),
        None if text
            .trim_start_matches('\u{feff}')
            .trim_start()
            .starts_with('[') =>
        {
            // An array is detected and split in one read; an event trace is then lowered from
            // that split instead of being read again by its front-end (what `compile_with`
            // would do), which for a large trace is a tenth of the compile.
            let (detected, raw, validated) = detect_and_split_unchecked(text)?;
            let wire = detected.format.wire();
            match wire.lower_split(text, &raw, validated, options) {
                Some(lowered) => {
                    return compile_lowered(&mut lowered?, options).map(release_session);
                }
                None => wire,
            }
        }
        None => detect(text)?.format.wire(),
    };
    compile_with(wire, text, options)
}

/// Compiles `text` as `wire` lowers it, without detecting its format: each conversation is
/// lowered, compiled on a session the format configures, rendered and reported; the reports
/// of records (JSONL of conversations) are gathered in one.
///
/// ```
/// use ctxgc_core::{Format, Options, compile::compile_with};
/// let chat = r#"[{"role": "user", "content": "hi"}]"#;
/// let out = compile_with(Format::OpenaiChat.wire(), chat, &Options::default()).unwrap();
/// // A kept message keeps its exact bytes.
/// assert_eq!(out.output, chat);
/// ```
pub fn compile_with(
    wire: &dyn WireFormat,
    text: &str,
    options: &Options,
) -> Result<Compiled, Error> {
    wire.compilable()?;
    let conversations = wire.lower(text, options)?;
    if matches!(conversations.as_slice(), [only] if only.record.is_none()) {
        let mut only = conversations
            .into_iter()
            .next()
            .ok_or_else(no_conversation)?;
        return compile_lowered(&mut only, options).map(release_session);
    }
    let mut records = Vec::new();
    for mut lowered in conversations {
        let (compiled, _) = compile_lowered(&mut lowered, options)?;
        let (id, line) = lowered.record.unwrap_or_default();
        records.push(RecordCompiled { id, line, compiled });
    }
    Ok(gather(records, options))
}

/// Sessions of at least this many items are freed on a background thread.
const BACKGROUND_FREE_ITEMS: usize = 10_000;

/// The report of a compile whose session is no longer needed. Freeing a large session item by
/// item costs about a tenth of compiling it, and the caller has nothing to wait for: it is
/// freed on a thread of its own (here, if that thread cannot be started).
fn release_session((compiled, session): (Compiled, Session)) -> Compiled {
    if session.items().len() >= BACKGROUND_FREE_ITEMS {
        let _ = std::thread::Builder::new()
            .name("ctxgc-free".into())
            .spawn(move || drop(session));
    }
    compiled
}

fn no_conversation() -> Error {
    Error::UnknownFormat("the input holds no conversation".into())
}

/// Compiles one lowered conversation (its items move into the session) and reports it.
pub fn compile_lowered(
    lowered: &mut Lowered<'_>,
    options: &Options,
) -> Result<(Compiled, Session), Error> {
    let session = session_of(lowered, options)?;
    let compiled = lowered
        .doc
        .format
        .wire()
        .report(lowered, &session, options)?;
    Ok((compiled, session))
}

/// The compiled session of one lowered conversation (its items move into the session).
fn session_of(lowered: &mut Lowered<'_>, options: &Options) -> Result<Session, Error> {
    let mut session = lowered.doc.format.wire().session(options);
    session.extend(std::mem::take(&mut lowered.doc.items))?;
    session.compile();
    Ok(session)
}

/// One report for every record of a JSONL input: outputs one per line, counts summed, ids
/// `<record id>#<item id>`; `records` keeps each record's own report.
fn gather(compiled: Vec<RecordCompiled>, options: &Options) -> Compiled {
    let mut all = Compiled {
        format: compiled
            .first()
            .map_or(Format::OpenaiChat, |c| c.compiled.format),
        output: String::new(),
        tokens_before: 0,
        tokens_after: 0,
        would_save_tokens: 0,
        tokenizer: options.tokenizer.name(),
        decisions: Vec::new(),
        receipts: Vec::new(),
        warnings: Vec::new(),
        chat: None,
        records: Vec::new(),
    };
    for r in &compiled {
        let c = &r.compiled;
        all.output.push_str(&c.output);
        all.output.push('\n');
        all.tokens_before += c.tokens_before;
        all.tokens_after += c.tokens_after;
        all.would_save_tokens += c.would_save_tokens;
        all.decisions.extend(c.decisions.iter().map(|d| Decision {
            id: record_item_id(&r.id, &d.id),
            by: d.by.iter().map(|b| record_item_id(&r.id, b)).collect(),
            ..d.clone()
        }));
        all.receipts.extend(c.receipts.iter().map(|rc| Receipt {
            id: record_item_id(&r.id, &rc.id),
            by: rc.by.iter().map(|b| record_item_id(&r.id, b)).collect(),
            ..rc.clone()
        }));
        all.warnings.extend(c.warnings.iter().map(|w| Diagnostic {
            message: format!("record {:?}: {}", r.id, w.message),
            ..w.clone()
        }));
    }
    if options.detail == Detail::Full {
        all.records = compiled;
    }
    all
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
    report_events_with(session, tokenizer, counting, Detail::Full)
}

/// [`report_events_counting`] filling in `detail` (with [`Detail::OutputOnly`] no decisions,
/// receipts or counts).
pub fn report_events_with(
    session: &Session,
    tokenizer: Tokenizer,
    counting: Counting,
    detail: Detail,
) -> Compiled {
    let plans = session.plans();
    let rendered = prompt::render_planned(session, &plans);
    let counting = detail.counting(counting);
    let tokens_before = counting.count(|| tokenizer.count(&uncompacted_events(session)));
    let tokens_after = counting.count(|| tokenizer.count(&rendered.text));
    let (decisions, receipts) = match detail {
        Detail::Full => {
            let decisions = session.decisions_of(&plans);
            let receipts = receipts_for(session.items(), &decisions);
            (decisions, receipts)
        }
        Detail::OutputOnly => (Vec::new(), Vec::new()),
    };
    Compiled {
        format: Format::Events,
        tokens_before,
        tokens_after,
        would_save_tokens: session.would_save_tokens_of(&plans),
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
    let wire = input_format(text, options)?.wire();
    wire.compilable()?;
    let conversations = wire.lower(text, options)?;
    let records = conversations.first().is_none_or(|c| c.record.is_some());
    let (mut lowered, item_id) = if records {
        let (record, item) = id.rsplit_once('#').ok_or_else(|| {
            Error::Usage(format!(
                "{id:?}: in a JSONL of records an item is named `<record id>#<item id>`"
            ))
        })?;
        let lowered = conversations
            .into_iter()
            .find(|c| c.record.as_ref().is_some_and(|(r, _)| r == record))
            .ok_or_else(|| Error::Usage(format!("no record with id {record:?} in the input")))?;
        (lowered, item.to_owned())
    } else {
        let lowered = conversations
            .into_iter()
            .next()
            .ok_or_else(no_conversation)?;
        (lowered, id.to_owned())
    };
    let session = session_of(&mut lowered, options)?;
    let i = session
        .position(&item_id)
        .ok_or_else(|| Error::Usage(format!("no item with id {item_id:?} in the input")))?;
    Ok((session.items()[i].raw.clone(), session.decision(i)))
}

/// The originals of every retired or rewritten item, by id (records: `<record id>#<item
/// id>`), from one compile: what a receipt store is filled with.
pub fn originals(text: &str, options: &Options) -> Result<Vec<(String, String)>, Error> {
    let wire = input_format(text, options)?.wire();
    wire.compilable()?;
    let mut out = Vec::new();
    for mut lowered in wire.lower(text, options)? {
        let session = session_of(&mut lowered, options)?;
        for (i, item) in session.items().iter().enumerate() {
            if session.plan_of(i).action() != Action::Keep {
                let id = match &lowered.record {
                    Some((r, _)) => record_item_id(r, &item.id),
                    None => item.id.clone(),
                };
                out.push((id, item.raw.clone()));
            }
        }
    }
    Ok(out)
}

/// The input rendered without compaction, and the compiled output, for diffing: event lines
/// for a trace, one `### id role` header per message then its text for a chat.
pub fn before_after(text: &str, options: &Options) -> Result<(String, String), Error> {
    let wire = input_format(text, options)?.wire();
    wire.compilable()?;
    let mut before = String::new();
    let mut after = String::new();
    for mut lowered in wire.lower(text, options)? {
        let session = session_of(&mut lowered, options)?;
        let prefix = match &lowered.record {
            Some((id, _)) => format!("{id}#"),
            None => String::new(),
        };
        let (b, a) = lowered
            .doc
            .format
            .wire()
            .before_after(&lowered, &session, options, &prefix)?;
        before.push_str(&b);
        after.push_str(&a);
    }
    Ok((before, after))
}

/// An event session's items as given, one line each in render order: what the compiled
/// prompt is measured and diffed against.
pub fn uncompacted_events(session: &Session) -> String {
    session
        .render_order()
        .into_iter()
        .map(|i| &session.items()[i])
        .filter(|item| !matches!(item.kind, crate::ir::Kind::EdgeInjection { .. }))
        .map(prompt::event_line)
        .collect()
}
