//! Keyword arguments as the compiler's options, with the CLI's messages for bad values.

use ctxgc_core::chat::{Schema, SchemaPolicy};
use ctxgc_core::{Format, Options, Tokenizer};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::convert::{to_json_text, wrong_type};
use crate::errors::{core_error, usage_error};

/// The tokenizer named `name`.
pub fn tokenizer(name: &str) -> PyResult<Tokenizer> {
    Tokenizer::from_name(name).ok_or_else(|| {
        usage_error(format!(
            "unknown tokenizer {name:?}: use o200k_base or cl100k_base"
        ))
    })
}

/// The input format named `name` (`None`: detect it).
pub fn format(name: Option<&str>) -> PyResult<Option<Format>> {
    name.map(|n| {
        Format::from_name(n).ok_or_else(|| {
            usage_error(format!(
                "unknown format {n:?}: use events, openai-chat, anthropic, responses or tracetrim"
            ))
        })
    })
    .transpose()
}

/// Reads a file as UTF-8 text, naming it in errors.
pub fn read_text(path: &std::path::Path) -> PyResult<String> {
    let bytes = std::fs::read(path)
        .map_err(|e| crate::errors::input_error(format!("{}: {e}", path.display())))?;
    ctxgc_core::error::decode_utf8(&bytes)
        .map(str::to_owned)
        .map_err(|e| crate::errors::input_error(format!("{}: {e}", path.display())))
}

/// A schema given as a dict, as JSON text, or as a path to a JSON file.
fn schema(value: &Bound<'_, PyAny>) -> PyResult<Schema> {
    let text = if let Ok(s) = value.cast::<PyString>() {
        s.to_str()?.to_owned()
    } else if value.cast::<PyDict>().is_ok() {
        to_json_text(value, "schema")?
    } else if value.hasattr("__fspath__")? {
        let path: std::path::PathBuf = value.extract()?;
        read_text(&path).map_err(|e| usage_error(format!("schema: {e}")))?
    } else {
        return Err(wrong_type("schema", "a dict, JSON text or a path", value));
    };
    Schema::from_json(&text).map_err(|e| usage_error(format!("schema: {e}")))
}

/// The chat options `compile_messages` and `compile` take.
pub struct ChatArgs<'a, 'py> {
    pub preset: &'a str,
    pub schema: Option<&'a Bound<'py, PyAny>>,
    pub format: Option<&'a str>,
    pub to: Option<&'a str>,
    pub tokenizer: &'a str,
    pub schema_policy: &'a str,
    pub keep_tools: Option<Vec<String>>,
    pub expand_tool: Option<String>,
    pub max_rows: Option<usize>,
    pub keep_rows: Option<usize>,
    pub max_lines: Option<usize>,
    pub safety_words: Option<Vec<String>>,
    pub max_keys: usize,
    pub max_value_chars: usize,
}

impl ChatArgs<'_, '_> {
    /// The compiler's options.
    pub fn to_options(&self) -> PyResult<Options> {
        let mut options = Options {
            from: format(self.format)?,
            tokenizer: tokenizer(self.tokenizer)?,
            ..Options::default()
        };
        let chat = &mut options.chat;
        chat.apply_preset(self.preset)
            .map_err(|e| usage_error(e.to_string()))?;
        if let Some(to) = self.to {
            chat.to = Some(Format::from_name(to).ok_or_else(|| {
                usage_error(format!(
                    "unknown format {to:?}: use openai-chat, anthropic or responses"
                ))
            })?);
        }
        chat.schema_policy = SchemaPolicy::from_name(self.schema_policy).ok_or_else(|| {
            usage_error(format!(
                "unknown schema policy {:?}: use flag, reject or off",
                self.schema_policy
            ))
        })?;
        if let Some(s) = self.schema.filter(|s| !s.is_none()) {
            chat.schema = Some(schema(s)?);
        }
        chat.keep_tools = self.keep_tools.clone().unwrap_or_default();
        chat.expand_tool = self.expand_tool.clone();
        chat.max_rows = self.max_rows;
        chat.keep_rows = self.keep_rows;
        chat.max_lines = self.max_lines;
        chat.extra_safety_words = self.safety_words.clone().unwrap_or_default();
        chat.max_keys = self.max_keys;
        chat.max_value_chars = self.max_value_chars;
        Ok(options)
    }
}

/// The options of an event trace.
pub fn event_options(
    protect_importance: f64,
    protect_tags: Option<Vec<String>>,
    allow_unknown: bool,
    tokenizer_name: &str,
) -> PyResult<Options> {
    if !protect_importance.is_finite() {
        return Err(usage_error(format!(
            "protect_importance must be a number between 0 and 10, not {protect_importance}"
        )));
    }
    let mut options = Options {
        from: Some(Format::Events),
        tokenizer: tokenizer(tokenizer_name)?,
        ..Options::default()
    };
    options.events.allow_unknown_types = allow_unknown;
    options.retention.min_importance = protect_importance;
    if let Some(tags) = protect_tags {
        options.retention.protected_tags = tags;
    }
    Ok(options)
}

/// JSON text of an input given as a Python value, or as JSON text already.
pub fn input_text(value: &Bound<'_, PyAny>, root: &str) -> PyResult<String> {
    match value.cast::<PyString>() {
        Ok(s) => Ok(s.to_str()?.to_owned()),
        Err(_) => to_json_text(value, root),
    }
}

/// Converts a compiler error.
pub fn core<T>(result: Result<T, ctxgc_core::Error>) -> PyResult<T> {
    result.map_err(core_error)
}
