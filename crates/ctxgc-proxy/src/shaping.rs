//! What the proxy does to a tool output on its way to the agent, behind one small interface:
//! [`OutputShaper`]. The proxy's MCP plumbing (listing, routing, transports, security,
//! logging) knows nothing of projections; the shapers here are thin adapters over
//! `ctxgc_core::projection`, which owns learning, trimming and the way back (`expand`).

use serde_json::Value;

/// A tool output as the agent will receive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaped {
    /// The text handed to the agent (the original when nothing was trimmed).
    pub text: String,
    /// How many fields were hidden, as the footer lists them (0 when nothing was hidden).
    pub fields_hidden: usize,
}

impl Shaped {
    /// The output unchanged.
    pub fn unchanged(raw: &str) -> Self {
        Shaped {
            text: raw.to_owned(),
            fields_hidden: 0,
        }
    }
}

/// A failure of the shaper, turned into a tool error for the agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

/// The `expand` or done tool the shaper offers: its name, description and input schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSurface {
    /// The tool's name.
    pub name: String,
    /// What it does, for the agent.
    pub description: String,
    /// Its JSON schema (an object schema).
    pub input_schema: serde_json::Map<String, Value>,
}

/// Transforms tool outputs for the agent and gives back what was hidden.
///
/// Implementations must be deterministic for a given state, and must never be asked to shape
/// what their own `expand` returned (the proxy does not route it through [`Self::shape`]).
pub trait OutputShaper: Send + Sync + 'static {
    /// What the agent receives for `raw`, the text output of `tool` called with `arguments`
    /// (`is_error`: the server flagged the result as an error).
    fn shape(
        &self,
        tool: &str,
        arguments: &Value,
        raw: &str,
        is_error: bool,
    ) -> Result<Shaped, ShapeError>;

    /// Whether outputs of `tool` may be trimmed now or later in this session (its published
    /// output schema then makes every field optional).
    fn may_trim(&self, tool: &str) -> bool {
        let _ = tool;
        false
    }

    /// The `expand` tool, when this shaper can hide anything.
    fn expand_tool(&self) -> Option<ToolSurface>;

    /// Answers an `expand` call (the arguments as the agent sent them).
    fn expand(&self, arguments: &Value) -> Result<String, ShapeError>;

    /// The done tool, when the shaper learns from the agent's final answer.
    fn done_tool(&self) -> Option<ToolSurface> {
        None
    }

    /// Answers a done call: closes the run.
    fn done(&self, arguments: &Value) -> Result<String, ShapeError> {
        let _ = arguments;
        Err(ShapeError("this proxy is not in automatic mode".into()))
    }

    /// The HTML report, when the shaper keeps one.
    fn report_html(&self) -> Option<String> {
        None
    }

    /// Saves whatever the shaper keeps (called when the proxy stops).
    fn flush(&self) {}

    /// Where the savings of trimmed calls are recorded: the store of the originals, when the
    /// shaper keeps them in one.
    fn savings_sink(&self) -> Option<crate::savings::SavingsSink> {
        None
    }
}

/// Forwards every output unchanged and offers no `expand`: the proxy used for telemetry only
/// (the per-call token line) or as a plain gateway.
#[derive(Debug, Clone, Copy, Default)]
pub struct PassThrough;

impl OutputShaper for PassThrough {
    fn shape(
        &self,
        _tool: &str,
        _arguments: &Value,
        raw: &str,
        _is_error: bool,
    ) -> Result<Shaped, ShapeError> {
        Ok(Shaped::unchanged(raw))
    }

    fn expand_tool(&self) -> Option<ToolSurface> {
        None
    }

    fn expand(&self, _arguments: &Value) -> Result<String, ShapeError> {
        Err(ShapeError(
            "nothing is trimmed by this proxy, so there is nothing to expand".into(),
        ))
    }
}
