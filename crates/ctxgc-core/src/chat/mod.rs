//! Chat transcripts: declared state, the register, entity schemas, tool-output compaction and
//! the compile path for OpenAI Chat Completions, Anthropic Messages and OpenAI Responses input.
//!
//! A chat compiles through the same [`crate::Session`] engine as an event trace; only the
//! passes differ ([`crate::passes::chat_pipeline`]). This module holds what those passes and
//! the message back-end share:
//!
//! - [`state`]: `<contextgc-state>` blocks (assert, pin, revoke, unsure), the trust boundary
//!   (only assistant turns may declare) and the [`state::Ledger`] of live facts;
//! - [`register`]: the `[ACTIVE_AGENT_STATE]` block rendered from the ledger, and read back
//!   when an earlier compile's output is compiled again;
//! - [`schema`]: optional entity schemas with a value contract per key;
//! - [`compact`]: lossless JSON re-encoding, row sampling with safety signals, text folding;
//! - [`pairing`]: which result answers which call (ids may be reused within a conversation);
//! - [`compile`]: the front door for chat inputs, used by [`crate::compile()`].
//!
//! ```
//! use ctxgc_core::{compile, Options};
//! let chat = r#"[
//!   {"role": "system", "content": "You are an airline support agent."},
//!   {"role": "user", "content": "Change the cabin on 0U4NPP, please."},
//!   {"role": "assistant", "content": "Done.<contextgc-state>{\"assert\": {\"cabin_class\": \"business\"}}</contextgc-state>"}
//! ]"#;
//! let out = compile(chat, &Options::default()).unwrap();
//! assert!(out.output.contains(r#"[ACTIVE_AGENT_STATE]\n- cabin_class = \"business\" (m2, declared)"#));
//! assert!(!out.output.contains("contextgc-state"));
//! ```

use serde::{Deserialize, Serialize};

use crate::formats::key::Format;
use crate::ir::{Block, Item, Kind, Message, Role, ToolOutput};
use crate::tokens::Tokenizer;

pub mod compact;
pub mod compile;
pub mod live;
pub mod lowering;
pub mod pairing;
pub mod plain;
pub mod register;
pub mod schema;
pub mod state;

pub use schema::{Schema, SchemaPolicy};

/// How much a chat compile may take away. Every preset keeps a receipt of everything it
/// changes; they differ in what the model still sees without asking for it back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Only rewrites that lose nothing (compact JSON, header + rows, identical repeated
    /// results pointed at their twin, state blocks moved into the register) and retirement of
    /// provably dead items (an earlier register).
    Lossless,
    /// Lossless, plus retirement of turns whose declared facts are all dead and stubs for reads
    /// superseded by a later different read. Sampling and folding of bulky outputs (and a
    /// `--projection`) apply only when the model has a recall tool (`expand_tool`) to get the
    /// original back, and only to outputs the agent has already answered; without a recall
    /// tool they are withheld and the report says what they would have saved.
    #[default]
    Default,
    /// Default with lower thresholds for sampling and folding, applied with or without a
    /// recall tool (still never to an output the agent has not answered yet).
    Aggressive,
}

impl Preset {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Lossless => "lossless",
            Preset::Default => "default",
            Preset::Aggressive => "aggressive",
        }
    }

    /// Parses [`Preset::name`].
    pub fn from_name(name: &str) -> Option<Preset> {
        [Preset::Lossless, Preset::Default, Preset::Aggressive]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// Every preset name a surface accepts (CLI `--preset`, Python `preset=`, the console's
/// `?preset=`), in the order they are listed to users.
pub const PRESET_NAMES: [&str; 5] = ["lossless", "default", "aggressive", "cache-stable", "eager"];

/// A preset name that is not one of [`PRESET_NAMES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPreset(pub String);

impl std::fmt::Display for UnknownPreset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown preset {:?}: use lossless, default, aggressive, cache-stable or eager",
            self.0
        )
    }
}

impl std::error::Error for UnknownPreset {}

/// Chat options as the caller gives them; [`ChatConfig::resolve`] fills in the preset.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatOptions {
    /// What may be taken away.
    pub preset: Preset,
    /// Render the output in this format instead of the input's.
    pub to: Option<Format>,
    /// Entity schema: which keys exist and a value contract per key.
    pub schema: Option<Schema>,
    /// What a declaration that breaks the schema does.
    pub schema_policy: SchemaPolicy,
    /// Tools whose outputs no pass touches (names or globs with `*` and `?`).
    pub keep_tools: Vec<String>,
    /// The tool the model can call to get a receipt back. Stubs name a receipt id only when
    /// this is set; its own outputs are never rewritten.
    pub expand_tool: Option<String>,
    /// Lists longer than this many rows are sampled (presets other than lossless).
    pub max_rows: Option<usize>,
    /// How many leading rows a sampled list keeps (besides every safety-flagged row).
    pub keep_rows: Option<usize>,
    /// Plain-text outputs longer than this many lines are folded (presets other than lossless).
    pub max_lines: Option<usize>,
    /// Words added to the safety signals (rows and lines carrying one are always kept).
    pub extra_safety_words: Vec<String>,
    /// At most this many keys are tracked at once; a new key beyond it is rejected.
    pub max_keys: usize,
    /// A declared value longer than this (as compact JSON) is rejected.
    pub max_value_chars: usize,
    /// Cache-stable compilation (`--preset cache-stable`): earlier output stays a byte-stable
    /// prefix and history is compacted in deliberate steps that pay for themselves under this
    /// cost model (see [`crate::session::CacheModel`]). The passes are the `preset`'s.
    pub cache: Option<crate::session::cache_model::CacheModel>,
    /// Agent turns after which a tool output is masked behind the recall tool (cache-stable
    /// with a recall tool only; `None`: the preset's, 0: never). See [`mask_after_turns`].
    pub mask_after_turns: Option<usize>,
}

impl ChatOptions {
    /// Sets the preset named `name` (one of [`PRESET_NAMES`]) and when its decisions are taken:
    /// `cache-stable` is the default preset's passes under the prompt-cache cost model, the
    /// others take every decision at once. `eager` names that second choice explicitly for the
    /// default passes: a one-shot compile of a finished transcript, where no prompt cache is
    /// read, pins it so its output does not depend on which of the two `default` means. The
    /// one parser of preset names: the CLI, Python and the console all call it.
    ///
    /// ```
    /// use ctxgc_core::chat::{ChatOptions, Preset};
    /// let mut chat = ChatOptions::default();
    /// chat.apply_preset("cache-stable").unwrap();
    /// assert_eq!((chat.preset, chat.cache.is_some()), (Preset::Default, true));
    /// chat.apply_preset("aggressive").unwrap();
    /// assert_eq!((chat.preset, chat.cache.is_some()), (Preset::Aggressive, false));
    /// chat.apply_preset("eager").unwrap();
    /// assert_eq!((chat.preset, chat.cache.is_some()), (Preset::Default, false));
    /// assert!(chat.apply_preset("fast").unwrap_err().to_string().contains("\"fast\""));
    /// ```
    pub fn apply_preset(&mut self, name: &str) -> Result<(), UnknownPreset> {
        let preset = match name {
            "cache-stable" | "eager" => Preset::Default,
            _ => Preset::from_name(name).ok_or_else(|| UnknownPreset(name.to_owned()))?,
        };
        self.preset = preset;
        self.cache =
            (name == "cache-stable").then(crate::session::cache_model::CacheModel::default);
        Ok(())
    }
}

impl Default for ChatOptions {
    fn default() -> Self {
        ChatOptions {
            preset: Preset::Default,
            to: None,
            schema: None,
            schema_policy: SchemaPolicy::Flag,
            keep_tools: Vec::new(),
            expand_tool: None,
            max_rows: None,
            keep_rows: None,
            max_lines: None,
            extra_safety_words: Vec::new(),
            max_keys: 64,
            max_value_chars: 256,
            cache: None,
            mask_after_turns: None,
        }
    }
}

/// Thresholds of row sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sampling {
    /// A list with more rows than this is sampled.
    pub max_rows: usize,
    /// Leading rows kept (safety-flagged rows are kept on top of these).
    pub keep_rows: usize,
}

/// Thresholds of text folding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Folding {
    /// A text with more lines than this is folded.
    pub max_lines: usize,
    /// Leading lines kept.
    pub head: usize,
    /// Trailing lines kept.
    pub tail: usize,
}

/// Everything the chat passes are configured with, resolved from [`ChatOptions`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatConfig {
    /// The preset it was resolved from.
    pub preset: Preset,
    /// Retire assistant turns whose declared facts are all dead.
    pub retire_superseded_facts: bool,
    /// Stub reads superseded by a later different read of the same call.
    pub stub_superseded_reads: bool,
    /// Stub results identical to the previous result of the same call.
    pub stub_duplicate_results: bool,
    /// Re-encode JSON outputs compactly (and as header + rows where smaller).
    pub compact_json: bool,
    /// Row sampling, when enabled.
    pub sampling: Option<Sampling>,
    /// Text folding, when enabled.
    pub folding: Option<Folding>,
    /// Lossy rewrites (sampling, folding) are computed but not applied: the `default` preset
    /// without a recall tool, where nobody could get the omitted part back. What they would
    /// have saved is reported ([`crate::Compiled::would_save_tokens`]).
    #[serde(default)]
    pub withhold_lossy: bool,
    /// Tools whose outputs no pass touches.
    pub keep_tools: Vec<String>,
    /// The recall tool, if the model has one.
    pub expand_tool: Option<String>,
    /// Rows and lines carrying one of these words are always kept. Shared: every pass of a
    /// pipeline holds the config, and the default list is built once per process.
    pub safety: std::sync::Arc<compact::SafetySignals>,
    /// Declared-state rules (schema, policy, caps).
    pub state: state::StateConfig,
    /// Counts tokens for "never make an output larger".
    pub tokenizer: Tokenizer,
    /// Mask tool outputs once this many agent turns followed them (`masked-output`): set in
    /// cache-stable mode with a recall tool, unless the preset is lossless.
    #[serde(default)]
    pub mask_after_turns: Option<usize>,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig::resolve(&ChatOptions::default(), Tokenizer::default())
    }
}

impl ChatConfig {
    /// Fills in the preset's thresholds, then the caller's overrides.
    ///
    /// ```
    /// use ctxgc_core::chat::{ChatConfig, ChatOptions, Preset};
    /// let lossless = ChatOptions { preset: Preset::Lossless, ..Default::default() };
    /// let config = ChatConfig::resolve(&lossless, Default::default());
    /// assert!(config.sampling.is_none() && config.folding.is_none());
    /// assert!(config.compact_json && !config.retire_superseded_facts);
    /// ```
    pub fn resolve(options: &ChatOptions, tokenizer: Tokenizer) -> ChatConfig {
        let (sampling, folding) = match options.preset {
            Preset::Lossless => (None, None),
            Preset::Default => (
                Some(Sampling {
                    max_rows: 30,
                    keep_rows: 10,
                }),
                Some(Folding {
                    max_lines: 150,
                    head: 50,
                    tail: 30,
                }),
            ),
            Preset::Aggressive => (
                Some(Sampling {
                    max_rows: 12,
                    keep_rows: 5,
                }),
                Some(Folding {
                    max_lines: 60,
                    head: 20,
                    tail: 15,
                }),
            ),
        };
        let lossy = options.preset != Preset::Lossless;
        let sampling = sampling.map(|s| {
            let max_rows = options.max_rows.unwrap_or(s.max_rows).max(1);
            Sampling {
                max_rows,
                keep_rows: options.keep_rows.unwrap_or(s.keep_rows).min(max_rows),
            }
        });
        let folding = folding.map(|f| {
            let max_lines = options.max_lines.unwrap_or(f.max_lines).max(2);
            // Head and tail shrink with a lower threshold, so folding still saves something.
            let head = f.head.min(max_lines / 3).max(1);
            let tail = f.tail.min(max_lines / 4).max(1);
            Folding {
                max_lines,
                head,
                tail,
            }
        });
        let safety = if options.extra_safety_words.is_empty() {
            compact::SafetySignals::shared_default()
        } else {
            let mut safety = compact::SafetySignals::default();
            safety.add_words(&options.extra_safety_words);
            std::sync::Arc::new(safety)
        };
        ChatConfig {
            preset: options.preset,
            retire_superseded_facts: lossy,
            stub_superseded_reads: lossy,
            stub_duplicate_results: true,
            compact_json: true,
            sampling,
            folding,
            withhold_lossy: withholds_lossy(options),
            keep_tools: options.keep_tools.clone(),
            expand_tool: options.expand_tool.clone(),
            safety,
            state: state::StateConfig {
                schema: options.schema.clone(),
                schema_policy: options.schema_policy,
                max_keys: options.max_keys,
                max_value_chars: options.max_value_chars,
            },
            tokenizer,
            mask_after_turns: mask_after_turns(options),
        }
    }

    /// True when no pass may touch the outputs of tool `name` (`--keep-tool`, or the recall
    /// tool itself: compressing what recall returns would loop).
    pub fn tool_protected(&self, name: &str) -> bool {
        self.expand_tool.as_deref() == Some(name)
            || self
                .keep_tools
                .iter()
                .any(|pattern| glob_match(pattern, name))
    }

    /// How a stub tells the model where the original is: through the recall tool when the
    /// model has one, otherwise by saying the operator keeps it (a stub never names a
    /// retrieval the model cannot perform).
    pub fn recovery_hint(&self, id: &str) -> String {
        match &self.expand_tool {
            Some(tool) => format!("call {tool} with id \"{id}\" for the full output"),
            None => format!("the full output is kept by the operator (ctxgc receipt {id})"),
        }
    }
}

/// After how many agent turns `options` mask a tool output (`masked-output`): with a recall
/// tool, in cache-stable mode, and not in the lossless preset; `ChatOptions::mask_after_turns`
/// overrides the preset's 3 (aggressive: 2), and 0 turns masking off.
///
/// ```
/// use ctxgc_core::chat::{ChatOptions, Preset, mask_after_turns};
/// let mut options = ChatOptions { expand_tool: Some("ctxgc_recall".into()), ..Default::default() };
/// assert_eq!(mask_after_turns(&options), None); // not cache-stable: history is not edited in steps
/// options.cache = Some(Default::default());
/// assert_eq!(mask_after_turns(&options), Some(3));
/// options.preset = Preset::Lossless;
/// assert_eq!(mask_after_turns(&options), None);
/// ```
pub fn mask_after_turns(options: &ChatOptions) -> Option<usize> {
    if options.expand_tool.is_none() || options.cache.is_none() {
        return None;
    }
    let preset = match options.preset {
        Preset::Lossless => return None,
        Preset::Default => 3,
        Preset::Aggressive => 2,
    };
    Some(options.mask_after_turns.unwrap_or(preset)).filter(|&n| n > 0)
}

/// True when `options` ask for the `default` preset without a recall tool: lossy rewrites
/// (sampling, folding, a projection) are then withheld, since an omitted part could be
/// recalled by nobody.
///
/// ```
/// use ctxgc_core::chat::{ChatOptions, Preset, withholds_lossy};
/// assert!(withholds_lossy(&ChatOptions::default()));
/// let recall = ChatOptions { expand_tool: Some("ctxgc_recall".into()), ..Default::default() };
/// assert!(!withholds_lossy(&recall));
/// let aggressive = ChatOptions { preset: Preset::Aggressive, ..Default::default() };
/// assert!(!withholds_lossy(&aggressive));
/// ```
pub fn withholds_lossy(options: &ChatOptions) -> bool {
    options.preset == Preset::Default && options.expand_tool.is_none()
}

/// Matches `name` against a glob with `*` (any run) and `?` (one character).
///
/// ```
/// use ctxgc_core::chat::glob_match;
/// assert!(glob_match("get_*", "get_user_details"));
/// assert!(glob_match("search_?irect_flight", "search_direct_flight"));
/// assert!(!glob_match("get_*", "list_users"));
/// ```
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matcher with one backtrack point: linear for patterns like these.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// How every note and stub ctxgc writes into a tool output opens (`[ctxgc: same output as
/// ...]`, `[ctxgc: superseded: ...]`, `[ctxgc: output sampled ...]`, `[ctxgc: long output
/// folded ...]`).
pub const NOTE_PREFIX: &str = "[ctxgc: ";

/// True when a tool output's text is one ctxgc wrote (a stub, or a sampled or folded output):
/// the output of an earlier compile being compiled again. Such a text is never evidence for
/// anything — it is not the tool's answer, only a pointer to it or a part of it — and is
/// never rewritten again, so compiling an output again changes nothing.
///
/// ```
/// use ctxgc_core::chat::written_by_ctxgc;
/// assert!(written_by_ctxgc("[ctxgc: same output as the identical call answered in m2]"));
/// assert!(!written_by_ctxgc("[{\"name\": \"Trail Mix\"}]"));
/// ```
pub fn written_by_ctxgc(text: &str) -> bool {
    text.starts_with(NOTE_PREFIX)
}

/// The message an item is, if it is one.
pub fn message_of(item: &Item) -> Option<&Message> {
    match &item.kind {
        Kind::Message(m) => Some(m),
        _ => None,
    }
}

/// The text of a tool output that passes may rewrite: a string, or a list holding exactly one
/// text part (OpenAI content parts, Anthropic tool_result blocks). Anything else (images,
/// several parts, structured values) is left alone.
pub fn output_text(output: &ToolOutput) -> Option<&str> {
    match &output.output {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Array(parts) => {
            let mut texts = parts.iter().filter_map(|p| {
                let ty = p.get("type").and_then(serde_json::Value::as_str)?;
                matches!(ty, "text" | "input_text" | "output_text")
                    .then(|| p.get("text").and_then(serde_json::Value::as_str))
                    .flatten()
            });
            let first = texts.next()?;
            let text_parts = parts
                .iter()
                .filter(|p| {
                    matches!(
                        p.get("type").and_then(serde_json::Value::as_str),
                        Some("text" | "input_text" | "output_text")
                    )
                })
                .count();
            (text_parts == 1).then_some(first)
        }
        _ => None,
    }
}

/// The text a block carries that a pass may read: visible text, or a tool output's text.
pub fn block_text(block: &Block) -> Option<&str> {
    match block {
        Block::Text { text } => Some(text),
        Block::ToolResult(out) => output_text(out),
        _ => None,
    }
}

/// True when the message has reasoning the provider needs back unedited.
pub fn has_thinking(message: &Message) -> bool {
    message.blocks.iter().any(|b| matches!(b, Block::Thinking))
}

/// True when the message makes tool calls.
pub fn has_calls(message: &Message) -> bool {
    message
        .blocks
        .iter()
        .any(|b| matches!(b, Block::ToolCall(_)))
}

/// The role's name in reports.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Serde for maps keyed by item position: stored as a list of `(key, value)` pairs in key
/// order. Pass state sits inside an internally tagged enum, where maps with integer keys do
/// not survive a round trip through JSON; a list of pairs does, in every format, and its
/// bytes are the same whatever the map's iteration order.
pub mod position_map {
    use std::collections::HashMap;
    use std::hash::BuildHasher;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes the map as pairs in key order.
    pub fn serialize<V: Serialize, H, S: Serializer>(
        map: &HashMap<usize, V, H>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut pairs: Vec<(&usize, &V)> = map.iter().collect();
        pairs.sort_by_key(|(k, _)| **k);
        serializer.collect_seq(pairs)
    }

    /// Reads pairs back into a map.
    pub fn deserialize<'de, V: Deserialize<'de>, H: BuildHasher + Default, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<HashMap<usize, V, H>, D::Error> {
        Ok(Vec::<(usize, V)>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}

/// Serde for ordered maps keyed by item position: a list of `(key, value)` pairs (see
/// [`position_map`]).
pub mod position_btree {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes the map as pairs in key order.
    pub fn serialize<V: Serialize, S: Serializer>(
        map: &BTreeMap<usize, V>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(map.iter())
    }

    /// Reads pairs back into a map.
    pub fn deserialize<'de, V: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<usize, V>, D::Error> {
        Ok(Vec::<(usize, V)>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}
