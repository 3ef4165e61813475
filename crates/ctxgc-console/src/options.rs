//! Compile options as the API takes them (query parameters), checked into core options.

use ctxgc_core::{Format, Options, Tokenizer};
use serde::Deserialize;

use crate::error::ApiError;

/// The presets the console offers, in the order the page shows them.
pub const PRESETS: [&str; 5] = ctxgc_core::chat::PRESET_NAMES;

/// `?preset=&from=&tokenizer=`; unknown parameters are refused, so a typo is not ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompileQuery {
    /// lossless, default, aggressive, cache-stable or eager (default: default).
    pub preset: Option<String>,
    /// The input format instead of detecting it.
    pub from: Option<String>,
    /// o200k_base (default) or cl100k_base.
    pub tokenizer: Option<String>,
    /// Accepted for links the page opens with its token; checked by the token middleware.
    #[allow(dead_code)]
    pub token: Option<String>,
}

impl CompileQuery {
    /// The preset's name, checked.
    pub fn preset_name(&self) -> Result<&str, ApiError> {
        let name = self.preset.as_deref().unwrap_or("default");
        if PRESETS.contains(&name) {
            Ok(name)
        } else {
            Err(ApiError::bad_request(
                "unknown-preset",
                format!(
                    "query parameter preset: unknown preset {name:?}; use lossless, default, aggressive, cache-stable or eager"
                ),
            ))
        }
    }

    /// The core options these parameters mean.
    pub fn to_options(&self) -> Result<Options, ApiError> {
        let mut options = Options::default();
        if let Some(from) = &self.from {
            options.from = Some(Format::from_name(from).ok_or_else(|| {
                ApiError::new(
                    axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                    "unknown-format",
                    format!(
                        "query parameter from: unknown format {from:?}; use events, openai-chat, anthropic or responses"
                    ),
                )
            })?);
        }
        if let Some(name) = &self.tokenizer {
            options.tokenizer = Tokenizer::from_name(name).ok_or_else(|| {
                ApiError::bad_request(
                    "unknown-tokenizer",
                    format!(
                        "query parameter tokenizer: unknown tokenizer {name:?}; use o200k_base or cl100k_base"
                    ),
                )
            })?;
        }
        apply_preset(&mut options, self.preset_name()?);
        Ok(options)
    }
}

/// Sets a checked preset name (one of [`PRESETS`]) on `options`.
pub fn apply_preset(options: &mut Options, name: &str) {
    // The name was checked against [`PRESETS`], the core's own list.
    if options.chat.apply_preset(name).is_err() {
        options.chat.apply_preset("default").unwrap_or_default();
    }
}
