//! `compile_messages`, `compile` and `receipt`: chat histories (OpenAI Chat Completions,
//! Anthropic Messages, OpenAI Responses input) and event traces through the compiler.

use ctxgc_core::plan::{Action, Reason};
use ctxgc_core::{Compiled, Format};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::{Value, json};

use crate::convert::{from_json_text, serialize, to_json_text, to_python, wrong_type};
use crate::errors::{internal_error, usage_error};
use crate::options::{ChatArgs, core, input_text};

/// How the history was given, which decides the shape given back.
enum Shape {
    /// A list of messages (and perhaps a separate Anthropic `system`).
    List,
    /// A whole request document (`{"model", "system", "messages", ...}`) or its JSON text.
    Document,
}

/// The JSON text of the history and its shape.
fn history_text(
    messages: &Bound<'_, PyAny>,
    system: Option<&Bound<'_, PyAny>>,
) -> PyResult<(String, Shape)> {
    let is_list = messages.cast::<PyList>().is_ok() || messages.cast::<PyTuple>().is_ok();
    let system = system.filter(|s| !s.is_none());
    if is_list {
        let list = to_json_text(messages, "messages")?;
        return Ok(match system {
            Some(system) => (
                format!(
                    "{{\"system\":{},\"messages\":{list}}}",
                    to_json_text(system, "system")?
                ),
                Shape::List,
            ),
            None => (list, Shape::List),
        });
    }
    if system.is_some() {
        return Err(usage_error(
            "system= goes with a list of messages; a request document carries its own `system`"
                .into(),
        ));
    }
    if messages.cast::<PyDict>().is_ok() || messages.cast::<PyString>().is_ok() {
        return Ok((input_text(messages, "messages")?, Shape::Document));
    }
    Err(wrong_type(
        "messages",
        "a list of messages, a request dict or JSON text",
        messages,
    ))
}

/// Compiles on a thread without the GIL: other Python threads run meanwhile.
fn compile_detached(
    py: Python<'_>,
    text: String,
    options: ctxgc_core::Options,
) -> PyResult<Compiled> {
    core(py.detach(move || ctxgc_core::compile(&text, &options)))
}

fn is_chat(format: Format) -> bool {
    format.wire().is_chat()
}

/// The telemetry of a chat compile: the compiler's report (as `ctxgc compile --json` prints
/// it, without the output) and, under the names contextgc users know, the same figures.
pub(crate) fn telemetry(compiled: &Compiled) -> PyResult<Value> {
    let mut report = serde_json::to_value(compiled)
        .map_err(|e| internal_error(format!("cannot serialise the report: {e}")))?;
    let Value::Object(map) = &mut report else {
        return Err(internal_error("the report is not an object".into()));
    };
    map.remove("output");
    let c = ContextgcCounts::of(
        compiled.tokens_before,
        compiled.tokens_after,
        compiled.tokenizer,
        compiled.decisions.iter().map(|d| (d.action, d.reason)),
    );
    let aliases = json!({
        "raw_token_count": c.before,
        "compiled_token_count": c.after,
        "tokens_saved": c.saved,
        "compression_ratio_pct": c.ratio_pct,
        "token_growth": c.growth,
        "context_grew": c.grew,
        "token_estimator": c.estimator,
        "retired_turn_indices": c.retired,
        "retired_turn_count": c.retired_count,
        "tool_payloads_compacted": c.compacted,
    });
    if let Value::Object(extra) = aliases {
        map.extend(extra);
    }
    Ok(report)
}

/// The figures contextgc's telemetry names, worked out from a compile's counts and each
/// item's action and reason (shared by `compile_messages` and `Chat`).
pub(crate) struct ContextgcCounts {
    pub before: usize,
    pub after: usize,
    pub saved: usize,
    pub ratio_pct: f64,
    pub growth: i64,
    pub grew: bool,
    pub estimator: String,
    pub retired: Vec<usize>,
    pub retired_count: usize,
    pub compacted: usize,
}

impl ContextgcCounts {
    pub(crate) fn of(
        before: usize,
        after: usize,
        tokenizer: &str,
        decisions: impl Iterator<Item = (Action, Option<Reason>)>,
    ) -> Self {
        let saved = before.saturating_sub(after);
        let mut retired = Vec::new();
        let mut compacted = 0;
        for (i, (action, reason)) in decisions.enumerate() {
            if action == Action::Retire {
                retired.push(i);
            }
            if matches!(
                reason,
                Some(Reason::CompactJson | Reason::SampleRows | Reason::FoldText)
            ) {
                compacted += 1;
            }
        }
        let ratio_pct = if before == 0 {
            0.0
        } else {
            (saved as f64 * 1000.0 / before as f64).round() / 10.0
        };
        ContextgcCounts {
            before,
            after,
            saved,
            ratio_pct,
            growth: after as i64 - before as i64,
            grew: after > before,
            estimator: format!("exact BPE ({tokenizer})"),
            retired_count: retired.len(),
            retired,
            compacted,
        }
    }
}

/// Compiles a chat history before it is sent: superseded turns retired, bulky tool outputs
/// compacted, declared state gathered in one register after the system prompt. Returns
/// `(messages, telemetry)`; see the package documentation.
#[pyfunction]
#[pyo3(signature = (
    messages, preset = "default", schema = None, *, system = None, format = None, to = None,
    tokenizer = "o200k_base", schema_policy = "flag", keep_tools = None, expand_tool = None,
    max_rows = None, keep_rows = None, max_lines = None, safety_words = None, max_keys = 64,
    max_value_chars = 256
))]
#[allow(clippy::too_many_arguments)]
pub fn compile_messages<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyAny>,
    preset: &str,
    schema: Option<&Bound<'py, PyAny>>,
    system: Option<&Bound<'py, PyAny>>,
    format: Option<&str>,
    to: Option<&str>,
    tokenizer: &str,
    schema_policy: &str,
    keep_tools: Option<Vec<String>>,
    expand_tool: Option<String>,
    max_rows: Option<usize>,
    keep_rows: Option<usize>,
    max_lines: Option<usize>,
    safety_words: Option<Vec<String>>,
    max_keys: usize,
    max_value_chars: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let options = ChatArgs {
        preset,
        schema,
        format,
        to,
        tokenizer,
        schema_policy,
        keep_tools,
        expand_tool,
        max_rows,
        keep_rows,
        max_lines,
        safety_words,
        max_keys,
        max_value_chars,
    }
    .to_options()?;
    if options.from.is_some_and(|f| !is_chat(f)) {
        return Err(usage_error(
            "compile_messages takes a chat history (openai-chat, anthropic or responses); use compact_events for event traces".into(),
        ));
    }
    let (text, shape) = history_text(messages, system)?;
    let compiled = compile_detached(py, text, options)?;
    if !compiled.records.is_empty() || !is_chat(compiled.format) {
        return Err(usage_error(
            "compile_messages takes one chat history (a list of messages or a request document); use compact_events for event traces".into(),
        ));
    }
    let mut telemetry = telemetry(&compiled)?;
    let output = from_json_text(py, &compiled.output)?;
    let messages_out = match shape {
        Shape::Document => output,
        Shape::List => match output.cast::<PyDict>() {
            // An Anthropic history with a system prompt (given, or needed by the register).
            Ok(doc) => {
                let system_out = doc.get_item("system")?;
                if let (Value::Object(map), Some(s)) = (&mut telemetry, &system_out) {
                    let text = to_json_text(s, "system")?;
                    let value = serde_json::from_str(&text)
                        .map_err(|e| internal_error(format!("the compiled system prompt: {e}")))?;
                    map.insert("system".into(), value);
                }
                match doc.get_item("messages")? {
                    Some(m) => m,
                    None => {
                        return Err(internal_error(
                            "the compiled document has no messages".into(),
                        ));
                    }
                }
            }
            Err(_) => output,
        },
    };
    let telemetry = to_python(py, &telemetry)?;
    PyTuple::new(py, [messages_out, telemetry])
}

/// Compiles any input ctxgc reads and returns the report `ctxgc compile --json` prints:
/// `output` (text), `tokens_before`, `tokens_after`, `decisions`, `receipts`, ...
#[pyfunction]
#[pyo3(signature = (
    input, preset = "default", schema = None, *, format = None, to = None,
    tokenizer = "o200k_base", schema_policy = "flag", keep_tools = None, expand_tool = None,
    max_rows = None, keep_rows = None, max_lines = None, safety_words = None, max_keys = 64,
    max_value_chars = 256, protect_importance = 8.0, protect_tags = None, allow_unknown = false
))]
#[allow(clippy::too_many_arguments)]
pub fn compile<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    preset: &str,
    schema: Option<&Bound<'py, PyAny>>,
    format: Option<&str>,
    to: Option<&str>,
    tokenizer: &str,
    schema_policy: &str,
    keep_tools: Option<Vec<String>>,
    expand_tool: Option<String>,
    max_rows: Option<usize>,
    keep_rows: Option<usize>,
    max_lines: Option<usize>,
    safety_words: Option<Vec<String>>,
    max_keys: usize,
    max_value_chars: usize,
    protect_importance: f64,
    protect_tags: Option<Vec<String>>,
    allow_unknown: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut options = ChatArgs {
        preset,
        schema,
        format,
        to,
        tokenizer,
        schema_policy,
        keep_tools,
        expand_tool,
        max_rows,
        keep_rows,
        max_lines,
        safety_words,
        max_keys,
        max_value_chars,
    }
    .to_options()?;
    let events =
        crate::options::event_options(protect_importance, protect_tags, allow_unknown, tokenizer)?;
    options.retention = events.retention;
    options.events = events.events;
    let text = input_text(input, "input")?;
    let compiled = compile_detached(py, text, options)?;
    serialize(py, &compiled)
}

/// The original of item `id` of an input, byte for byte (as text), and what was decided
/// for it: `{"id", "original", "decision"}`.
#[pyfunction]
#[pyo3(signature = (input, id, *, preset = "default", format = None, tokenizer = "o200k_base"))]
pub fn receipt<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    id: &str,
    preset: &str,
    format: Option<&str>,
    tokenizer: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let options = ChatArgs {
        preset,
        schema: None,
        format,
        to: None,
        tokenizer,
        schema_policy: "flag",
        keep_tools: None,
        expand_tool: None,
        max_rows: None,
        keep_rows: None,
        max_lines: None,
        safety_words: None,
        max_keys: 64,
        max_value_chars: 256,
    }
    .to_options()?;
    let text = input_text(input, "input")?;
    let id_owned = id.to_owned();
    let (original, decision) =
        core(py.detach(move || ctxgc_core::receipt(&text, &options, &id_owned)))?;
    serialize(
        py,
        &json!({"id": id, "original": original, "decision": decision}),
    )
}
