//! `ctxgc`: our compiler, through its public front door ([`ctxgc_core::compile`]), in its
//! default configuration or a named preset.
//!
//! Each prefix is given to the compiler exactly as an agent's history would be: the input
//! format's JSON list of the items' original bytes. The output is read back into segments:
//! - an event trace compiles to prompt text, one block per line that starts with `[`; a block
//!   `[receipt …]` / `[receipts …]` is a receipt stub, and the retired items it names are
//!   recoverable (the compiler reports a receipt for each);
//! - a message list compiles to a message list in the same format, lowered back through the
//!   same front-end; a retired or rewritten item is recoverable when the output names its id
//!   (the model can only redeem a receipt it can see).

use ctxgc_core::chat::live::LiveChat;
use ctxgc_core::compile::receipts_for;
use ctxgc_core::frontend::lower_conversations;
use ctxgc_core::{Action, Decision, Format, Options, Receipt};

use crate::context::{Context, Segment, SegmentKind, id_words};
use crate::prepare::Prepared;
use crate::strategy::{Params, Prefix, PrefixRun, SpecError, Strategy, StrategyError};

/// The recall tool the `-recall` and `-projection` strategies offer (the gateway's name).
pub const RECALL_TOOL: &str = "ctxgc_recall";

/// ctxgc with a configuration.
pub struct Ctxgc {
    name: String,
    summary: &'static str,
    configure: fn(&mut Options),
    projection: bool,
}

impl Ctxgc {
    /// ctxgc reported under `name`, with `configure` applied to the options the input was
    /// read with.
    pub fn new(name: &str, summary: &'static str, configure: fn(&mut Options)) -> Self {
        Ctxgc {
            name: name.to_owned(),
            summary,
            configure,
            projection: false,
        }
    }

    /// The same, trimming tool outputs on arrival with the projection learned leave-one-out
    /// for each conversation ([`crate::prepare::Prepared::projection`]).
    pub fn with_projection(mut self) -> Self {
        self.projection = true;
        self
    }

    /// ctxgc in its default configuration.
    pub fn default_configuration() -> Self {
        Ctxgc::new("ctxgc", "ctxgc compile, default configuration", |_| {})
    }
}

/// Builds `ctxgc-recall`: the default preset with a recall tool offered (no parameters).
pub fn build_recall(_spec: &str, params: &Params) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&[])?;
    Ok(Box::new(Ctxgc::new(
        "ctxgc-recall",
        "ctxgc compile --expand-tool ctxgc_recall: the default preset with a recall tool, so lossy rewrites apply to answered outputs",
        |o| o.chat.expand_tool = Some(RECALL_TOOL.to_owned()),
    )))
}

/// Builds `ctxgc-projection`: as `ctxgc-recall`, plus projections learned leave-one-out from
/// the other conversations of the same input file, applied on arrival (no parameters).
pub fn build_projection(_spec: &str, params: &Params) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&[])?;
    Ok(Box::new(
        Ctxgc::new(
            "ctxgc-projection",
            "ctxgc compile --expand-tool ctxgc_recall --projection P, P learned from the other conversations of the same file (leave-one-out), applied on arrival",
            |o| o.chat.expand_tool = Some(RECALL_TOOL.to_owned()),
        )
        .with_projection(),
    ))
}

/// Builds `ctxgc-cache-projection`: what the gateway runs with `--recall` and a projection —
/// cache-stable compilation, a recall tool, and the leave-one-out projection (no parameters).
pub fn build_cache_projection(
    _spec: &str,
    params: &Params,
) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&[])?;
    Ok(Box::new(
        Ctxgc::new(
            "ctxgc-cache-projection",
            "ctxgc compile --preset cache-stable --expand-tool ctxgc_recall --projection P (P learned leave-one-out): history compacted in steps that pay, lossy rewrites recallable",
            |o| {
                o.chat.expand_tool = Some(RECALL_TOOL.to_owned());
                o.chat.cache = Some(ctxgc_core::session::CacheModel::default());
            },
        )
        .with_projection(),
    ))
}

/// Builds `ctxgc` (no parameters).
pub fn build_default(_spec: &str, params: &Params) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&[])?;
    Ok(Box::new(Ctxgc::default_configuration()))
}

/// Builds a ctxgc strategy named `name` whose options `configure` sets (no parameters): what a
/// preset's line in [`crate::strategy::BUILTIN`] calls.
pub fn configured(
    params: &Params,
    name: &str,
    summary: &'static str,
    configure: fn(&mut Options),
) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&[])?;
    Ok(Box::new(Ctxgc::new(name, summary, configure)))
}

impl Strategy for Ctxgc {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.summary.to_owned()
    }

    fn wants_projection(&self) -> bool {
        self.projection
    }

    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let input = prefix.input;
        let options = self.options(input);
        let text = input.prefix_json(prefix.len);
        let compiled = ctxgc_core::compile(&text, &options)
            .map_err(|e| StrategyError(format!("compile: {e}")))?;
        context_of(
            input,
            &options,
            compiled.format,
            &compiled.output,
            &compiled.decisions,
            &compiled.receipts,
        )
    }

    /// A chat is kept in a [`LiveChat`] between requests, as the gateway and Python's
    /// `Chat` keep one, so each request compiles only what was appended (the live session
    /// decides exactly as a whole compile of the prefix). Other inputs, and a chat the live
    /// session refuses, are compiled prefix by prefix.
    fn run<'a>(&'a self, input: &'a Prepared) -> Box<dyn PrefixRun + 'a> {
        Box::new(LiveRun {
            strategy: self,
            input,
            options: self.options(input),
            live: None,
            fed: 0,
            whole_compiles: !input.conversation.format.wire().is_chat(),
        })
    }
}

impl Ctxgc {
    /// The options a prefix of `input` is compiled with.
    fn options(&self, input: &Prepared) -> Options {
        let mut options = input.options.clone();
        options.from = Some(input.conversation.format);
        (self.configure)(&mut options);
        if self.projection {
            options.projection = input.projection.clone();
        }
        options
    }
}

/// [`Ctxgc`]'s run over one conversation: a live chat fed message by message.
struct LiveRun<'a> {
    strategy: &'a Ctxgc,
    input: &'a Prepared,
    options: Options,
    live: Option<LiveChat>,
    /// Items given to `live` so far.
    fed: usize,
    /// Set for inputs that are not chats, and once the live session refused an item.
    whole_compiles: bool,
}

impl LiveRun<'_> {
    /// Brings the live chat up to the first `len` items, or drops it where it cannot hold them.
    fn feed(&mut self, len: usize) {
        let input = self.input;
        match &mut self.live {
            None => self.live = LiveChat::new(&input.prefix_json(len), &self.options).ok(),
            Some(live) => {
                for item in &input.conversation.items[self.fed..len] {
                    if live.append(&item.raw).is_err() {
                        self.live = None;
                        break;
                    }
                }
            }
        }
        self.fed = len;
    }
}

impl PrefixRun for LiveRun<'_> {
    fn context(&mut self, len: usize) -> Result<Context, StrategyError> {
        let (strategy, input) = (self.strategy, self.input);
        if self.whole_compiles {
            return strategy.compact(Prefix { input, len });
        }
        self.feed(len);
        let Some(live) = &self.live else {
            self.whole_compiles = true;
            return strategy.compact(Prefix { input, len });
        };
        let rendered = live
            .render()
            .map_err(|e| StrategyError(format!("render: {e}")))?;
        let session = live.session();
        let decisions = session.decisions();
        let receipts = receipts_for(session.items(), &decisions);
        context_of(
            input,
            &self.options,
            live.format(),
            &rendered.text,
            &decisions,
            &receipts,
        )
    }
}

/// What a compile of `input`'s prefix sends, read back from its output, decisions and
/// receipts.
fn context_of(
    input: &Prepared,
    options: &Options,
    format: Format,
    output: &str,
    decisions: &[Decision],
    receipts: &[Receipt],
) -> Result<Context, StrategyError> {
    let items_kept = decisions
        .iter()
        .filter(|d| d.action != Action::Retire)
        .filter(|d| input.index_of.get(&d.id).is_none_or(|&i| input.rendered(i)))
        .count();
    let chat = format.wire().is_chat();
    let mut context = if chat {
        message_context(format, output)?
    } else {
        event_context(input, output)
    };
    context.items_kept = items_kept;
    // Recoverable: items the compiler holds a receipt for, named where the model can see.
    let named = if chat {
        output.to_owned()
    } else {
        context
            .segments
            .iter()
            .filter(|s| s.kind == SegmentKind::Stub)
            .map(|s| s.text.as_str())
            .collect::<String>()
    };
    let words = id_words(&named);
    context.recall_offered = options.chat.expand_tool.is_some();
    context.recoverable = receipts
        .iter()
        .filter(|r| words.contains(r.id.as_str()))
        .map(|r| r.id.clone())
        .collect();
    Ok(context)
}

/// Splits compiled prompt text into its blocks (a block starts at a line beginning with `[`;
/// continuation lines are indented).
fn event_context(input: &crate::prepare::Prepared, output: &str) -> Context {
    let mut blocks: Vec<String> = Vec::new();
    for line in output.split_inclusive('\n') {
        match blocks.last_mut() {
            Some(last) if !line.starts_with('[') => last.push_str(line),
            _ => blocks.push(line.to_owned()),
        }
    }
    let segments = blocks
        .into_iter()
        .map(|text| {
            let kind = if text.starts_with("[receipt ") || text.starts_with("[receipts ") {
                SegmentKind::Stub
            } else {
                let id = text
                    .strip_prefix('[')
                    .and_then(|rest| rest.split("] ").next())
                    .unwrap_or_default();
                match input.index_of.get(id) {
                    Some(&i) if crate::context::is_tool_output(&input.conversation.items[i]) => {
                        SegmentKind::ToolOutput
                    }
                    _ => SegmentKind::Content,
                }
            };
            Segment { text, kind }
        })
        .collect();
    Context {
        segments,
        ..Context::default()
    }
}

/// Reads a compiled message list (or a request body holding one) back through the
/// front-end: one segment per item, structure left out.
///
/// ```
/// use ctxgc_bench::strategy::ctxgc::message_context;
/// let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
/// let context = message_context(ctxgc_core::Format::OpenaiChat, body).unwrap();
/// assert_eq!(context.segments.len(), 1);
/// ```
pub fn message_context(format: Format, output: &str) -> Result<Context, StrategyError> {
    let options = Options {
        from: Some(format),
        ..Options::default()
    };
    let conversations = lower_conversations(output, &options)
        .map_err(|e| StrategyError(format!("reading the output back as {}: {e}", format.name())))?;
    let segments = conversations
        .iter()
        .flat_map(|c| c.items.iter())
        .filter(|i| !crate::context::is_structure(i))
        .map(crate::context::item_segment)
        .collect();
    Ok(Context {
        segments,
        ..Context::default()
    })
}
