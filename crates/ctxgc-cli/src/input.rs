//! Reading input (a file or stdin) and the options shared by every compiling command.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;
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
        Ok(options)
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
    let text = ctxgc_core::error::decode_utf8(&bytes)?;
    Ok(text.to_owned())
}
