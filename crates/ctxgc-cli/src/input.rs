//! Reading input (a file or stdin) and the options shared by every compiling command.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use ctxgc_core::chat::{ChatOptions, Schema, SchemaPolicy};
use ctxgc_core::{Format, Options, Tokenizer};

use crate::Failure;

/// Options every compiling command takes.
#[derive(Debug, Args, Clone)]
pub struct CompileOptions {
    /// Input format, instead of detecting it: events, openai-chat, anthropic, responses, tracetrim.
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Keep events of unknown types as opaque items (never pruned) instead of failing.
    #[arg(long)]
    pub allow_unknown: bool,
    /// Protect items whose importance is at or above this (0-10).
    #[arg(long, value_name = "LEVEL", default_value_t = 8.0)]
    pub protect_importance: f64,
    /// Protect items carrying this tag (repeatable; replaces the default tags keep, pinned, critical, protected).
    #[arg(long = "protect-tag", value_name = "TAG")]
    pub protect_tags: Vec<String>,
    /// Tokenizer for exact counts: o200k_base (default) or cl100k_base.
    #[arg(long, default_value = "o200k_base")]
    pub tokenizer: String,
    /// Chats: what may be taken away: lossless, default, aggressive, cache-stable (default's
    /// passes, history compacted only in steps that pay for themselves under a prompt cache) or
    /// eager (default's passes, every decision at once: for one-shot compiles).
    #[arg(long, value_name = "PRESET", default_value = "default")]
    pub preset: String,
    /// Chats: write the output in this format (openai-chat, anthropic, responses) instead of the input's.
    #[arg(long, value_name = "FORMAT")]
    pub to: Option<String>,
    /// Chats: entity schema for declared state (ctxgc `keys` form or the contextgc entity-schema form).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Chats: what a declaration that breaks the schema does: flag (default), reject, off (always reported).
    #[arg(long, value_name = "POLICY", default_value = "flag")]
    pub schema_policy: String,
    /// Chats: never touch the outputs of this tool (name or glob with * and ?; repeatable).
    #[arg(long = "keep-tool", value_name = "NAME")]
    pub keep_tools: Vec<String>,
    /// Chats: the recall tool the model has; only then do stubs name a receipt id to fetch.
    #[arg(long, value_name = "NAME")]
    pub expand_tool: Option<String>,
    /// Chats: sample lists of records longer than this many rows (overrides the preset).
    #[arg(long, value_name = "N")]
    pub max_rows: Option<usize>,
    /// Chats: leading rows a sampled list keeps, besides safety-flagged rows (overrides the preset).
    #[arg(long, value_name = "N")]
    pub keep_rows: Option<usize>,
    /// Chats: fold plain-text outputs longer than this many lines (overrides the preset).
    #[arg(long, value_name = "N")]
    pub max_lines: Option<usize>,
    /// Chats, cache-stable with a recall tool: mask a tool output behind the recall tool once
    /// this many agent turns followed it (overrides the preset's 3, aggressive 2; 0: never).
    #[arg(long, value_name = "TURNS")]
    pub mask_after: Option<usize>,
    /// Chats: a word that keeps any row or line carrying it (repeatable; added to the safety list).
    #[arg(long = "safety-word", value_name = "WORD")]
    pub safety_words: Vec<String>,
    /// Chats: most declared keys tracked at once.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_keys: usize,
    /// Chats: longest declared value, in characters of compact JSON.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_value_chars: usize,
    /// A learned or reviewed projection (the file `ctxgc learn` writes) that trims tool
    /// outputs on arrival, in chats and event traces (reason `projection`).
    #[arg(long, value_name = "FILE")]
    pub projection: Option<PathBuf>,
}

impl CompileOptions {
    /// The core options these flags mean.
    pub fn to_options(&self) -> Result<Options, Failure> {
        let mut options = Options::default();
        if let Some(from) = &self.from {
            options.from = Some(Format::from_name(from).ok_or_else(|| {
                Failure::Usage(format!(
                    "unknown format {from:?}: use events, openai-chat, anthropic, responses or tracetrim"
                ))
            })?);
        }
        options.events.allow_unknown_types = self.allow_unknown;
        options.retention.min_importance = self.protect_importance;
        if !self.protect_tags.is_empty() {
            options.retention.protected_tags = self.protect_tags.clone();
        }
        options.tokenizer = Tokenizer::from_name(&self.tokenizer).ok_or_else(|| {
            Failure::Usage(format!(
                "unknown tokenizer {:?}: use o200k_base or cl100k_base",
                self.tokenizer
            ))
        })?;
        self.chat_options(&mut options.chat)?;
        if let Some(path) = &self.projection {
            let text = read_input(Some(path)).map_err(|e| match e {
                Failure::Input(m) => Failure::Usage(format!("--projection: {m}")),
                other => other,
            })?;
            options.projection = Some(
                ctxgc_core::projection::Projection::from_json(&text)
                    .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?,
            );
        }
        Ok(options)
    }
}

impl CompileOptions {
    fn chat_options(&self, chat: &mut ChatOptions) -> Result<(), Failure> {
        chat.apply_preset(&self.preset)
            .map_err(|e| Failure::Usage(e.to_string()))?;
        if let Some(to) = &self.to {
            chat.to = Some(Format::from_name(to).ok_or_else(|| {
                Failure::Usage(format!(
                    "unknown format {to:?}: use openai-chat, anthropic or responses"
                ))
            })?);
        }
        chat.schema_policy = SchemaPolicy::from_name(&self.schema_policy).ok_or_else(|| {
            Failure::Usage(format!(
                "unknown schema policy {:?}: use flag, reject or off",
                self.schema_policy
            ))
        })?;
        if let Some(path) = &self.schema {
            let text = read_input(Some(path)).map_err(|e| match e {
                Failure::Input(m) => Failure::Usage(format!("--schema: {m}")),
                other => other,
            })?;
            chat.schema = Some(
                Schema::from_json(&text)
                    .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?,
            );
        }
        chat.keep_tools = self.keep_tools.clone();
        chat.expand_tool = self.expand_tool.clone();
        chat.max_rows = self.max_rows;
        chat.keep_rows = self.keep_rows;
        chat.max_lines = self.max_lines;
        chat.mask_after_turns = self.mask_after;
        chat.extra_safety_words = self.safety_words.clone();
        chat.max_keys = self.max_keys;
        chat.max_value_chars = self.max_value_chars;
        Ok(())
    }
}

/// Reads a file, or stdin for `-` or no path, and checks it is UTF-8.
pub fn read_input(path: Option<&PathBuf>) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    match path {
        Some(p) if p.as_os_str() != "-" => {
            bytes =
                std::fs::read(p).map_err(|e| Failure::Input(format!("{}: {e}", p.display())))?;
        }
        _ => {
            std::io::stdin().read_to_end(&mut bytes)?;
        }
    }
    // The bytes become the string in place: a large trace is not copied a second time.
    String::from_utf8(bytes).map_err(|e| match ctxgc_core::error::decode_utf8(e.as_bytes()) {
        Err(located) => Failure::from(located),
        Ok(_) => Failure::Input(format!("invalid UTF-8: {e}")),
    })
}
