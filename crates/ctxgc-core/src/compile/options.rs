//! What a compile can be told ([`Options`]) and the empty session those options configure:
//! the leaf every format, driver and surface reads, so that none of them depends on the driver
//! to know its options.

use crate::chat::ChatOptions;
use crate::formats::key::Format;
use crate::passes::AnyPass;
use crate::projection::Projection;
use crate::session::{RetentionPolicy, Session};
use crate::tokens::Tokenizer;

/// Options of the event front-end.
#[derive(Debug, Clone, Default)]
pub struct EventOptions {
    /// Let events of unknown types through as opaque items (never pruned) instead of failing.
    pub allow_unknown_types: bool,
}

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
    pub chat: ChatOptions,
    /// Whether the report carries token counts. Decisions never depend on it: the passes
    /// that compare costs count what they compare either way.
    pub counting: Counting,
    /// A learned or reviewed projection that trims tool outputs on arrival (chats and event
    /// traces); its stubs name `chat.expand_tool` when one is set, and `chat.keep_tools` are
    /// never trimmed.
    pub projection: Option<Projection>,
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
