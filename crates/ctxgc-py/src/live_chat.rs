//! `Chat`: a chat kept compiled between calls, so compiling before every request of an agent
//! loop costs what was appended since the last request, not the whole history.
//!
//! Over [`LiveChat`]: each message is lowered and compiled once, the plans and the messages as
//! sent are kept, and so are their Python objects: a compile after an append builds objects
//! only for the messages whose text changed. What it gives is what `compile_messages` gives
//! for the whole history (the messages, the counts, the retired turns;
//! `tests/python/test_live_chat.py` compares them after every message on the corpus).
//!
//! Chat steps take microseconds, so they hold the GIL (releasing and taking it back would cost
//! more); the first compile of a long history given at once is the exception, and is as fast
//! as `compile_messages`.

use std::sync::Mutex;

use ctxgc_core::chat::compile::payload_tokens;
use ctxgc_core::chat::live::LiveChat;
use ctxgc_core::plan::{Action, Reason};
use ctxgc_core::render::messages::Source;
use ctxgc_core::{Error, Format, Kind, Options};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::chat::ContextgcCounts;
use crate::convert::{from_json_text, to_json_text, wrong_type};
use crate::errors::{core_error, internal_error, usage_error};
use crate::options::ChatArgs;

/// What a `Chat` holds, behind its lock.
#[derive(Default)]
struct State {
    /// The compiled chat; `None` until the first message.
    live: Option<LiveChat>,
    /// JSON text of every message given, in order: a refused append starts over from them.
    given: Vec<String>,
    /// The list objects `compile()` was given last, to recognise the same history resent
    /// with messages added.
    last_list: Vec<Py<PyAny>>,
    /// The Anthropic system prompt given (JSON text).
    system: Option<String>,
    /// Each item's message as sent, as a Python object (`None`: not built, or stale).
    objects: Vec<Option<Py<PyAny>>>,
    /// The register message as sent, and its Python object.
    register: Option<(String, Py<PyAny>)>,
}

/// A chat history kept compiled between requests. See the package documentation.
#[pyclass(module = "ctxgc._native", name = "Chat")]
pub struct Chat {
    options: Options,
    state: Mutex<State>,
}

/// The document text of a history: a list, or Anthropic's `{"system", "messages"}`.
fn document(system: Option<&str>, messages: &[String]) -> String {
    let list = format!("[{}]", messages.join(","));
    match system {
        Some(system) => format!("{{\"system\":{system},\"messages\":{list}}}"),
        None => list,
    }
}

fn items_of<'py>(value: &Bound<'py, PyAny>, name: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(list) = value.cast::<PyList>() {
        Ok(list.iter().collect())
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        Ok(tuple.iter().collect())
    } else {
        Err(wrong_type(name, "a list of messages", value))
    }
}

impl State {
    /// Starts over from `messages` (JSON texts): a new live chat, nothing kept.
    fn restart(&mut self, options: &Options, messages: Vec<String>) -> Result<(), Error> {
        self.live = None;
        self.objects.clear();
        self.register = None;
        if !messages.is_empty() {
            self.live = Some(LiveChat::new(
                &document(self.system.as_deref(), &messages),
                options,
            )?);
        }
        self.given = messages;
        Ok(())
    }

    /// Appends messages (JSON texts) one by one; an append the live chat refuses (it would
    /// change what earlier messages are) starts over from the whole history.
    fn append(&mut self, options: &Options, messages: Vec<String>) -> Result<(), Error> {
        for json in messages {
            let Some(live) = self.live.as_mut() else {
                self.restart(options, vec![json])?;
                continue;
            };
            match live.append(&json) {
                Ok(_) => self.given.push(json),
                Err(Error::Usage(_)) => {
                    let mut all = std::mem::take(&mut self.given);
                    all.push(json);
                    let kept = all.clone();
                    if let Err(e) = self.restart(options, all) {
                        // The message is refused: the chat stays what it was.
                        let _ = self.restart(options, kept[..kept.len() - 1].to_vec());
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The telemetry of a compile, in the names `compile_messages` gives them.
fn telemetry<'py>(
    py: Python<'py>,
    format: Format,
    tokenizer: &'static str,
    before: usize,
    after: usize,
    actions: &[Action],
    reasons: &[Option<Reason>],
) -> PyResult<Bound<'py, PyDict>> {
    let c = ContextgcCounts::of(
        before,
        after,
        tokenizer,
        actions.iter().copied().zip(reasons.iter().copied()),
    );
    let dict = PyDict::new(py);
    dict.set_item("format", format.name())?;
    dict.set_item("tokens_before", c.before)?;
    dict.set_item("tokens_after", c.after)?;
    dict.set_item("tokenizer", tokenizer)?;
    dict.set_item("raw_token_count", c.before)?;
    dict.set_item("compiled_token_count", c.after)?;
    dict.set_item("tokens_saved", c.saved)?;
    dict.set_item("compression_ratio_pct", c.ratio_pct)?;
    dict.set_item("token_growth", c.growth)?;
    dict.set_item("context_grew", c.grew)?;
    dict.set_item("token_estimator", c.estimator)?;
    dict.set_item("retired_turn_count", c.retired_count)?;
    dict.set_item("retired_turn_indices", c.retired)?;
    dict.set_item("tool_payloads_compacted", c.compacted)?;
    Ok(dict)
}

impl Chat {
    fn state(&self) -> PyResult<std::sync::MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| internal_error("a previous call panicked while holding the chat".into()))
    }

    fn texts(messages: &[Bound<'_, PyAny>], start: usize) -> PyResult<Vec<String>> {
        (messages.iter().enumerate())
            .map(|(k, m)| to_json_text(m, &format!("messages[{}]", start + k)))
            .collect()
    }

    fn compiled_from<'py>(
        &self,
        py: Python<'py>,
        state: &mut State,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let tokenizer = self.options.tokenizer;
        let State {
            live,
            objects,
            register,
            ..
        } = state;
        let Some(live) = live.as_mut() else {
            let t = telemetry(py, Format::OpenaiChat, tokenizer.name(), 0, 0, &[], &[])?;
            return PyTuple::new(py, [PyList::empty(py).into_any(), t.into_any()]);
        };
        let format = live.format();
        if let Some(sent) = live.sent().map_err(core_error)? {
            let n = sent.actions.len();
            match &sent.changed {
                Some(changed) => {
                    objects.resize_with(n, || None);
                    for &i in changed {
                        objects[i] = None;
                    }
                }
                None => {
                    objects.clear();
                    objects.resize_with(n, || None);
                }
            }
            let mut list = Vec::with_capacity(sent.messages.len());
            for m in &sent.messages {
                let object = match m.source {
                    Source::Item(i) => match &objects[i] {
                        Some(o) => o.clone_ref(py),
                        None => {
                            let o = from_json_text(py, m.json)?.unbind();
                            objects[i] = Some(o.clone_ref(py));
                            o
                        }
                    },
                    Source::Register => match register {
                        Some((json, o)) if json == m.json => o.clone_ref(py),
                        _ => {
                            let o = from_json_text(py, m.json)?.unbind();
                            *register = Some((m.json.to_owned(), o.clone_ref(py)));
                            o
                        }
                    },
                };
                list.push(object);
            }
            let t = telemetry(
                py,
                format,
                tokenizer.name(),
                sent.tokens_before,
                sent.tokens_after,
                sent.actions,
                sent.reasons,
            )?;
            return PyTuple::new(py, [PyList::new(py, list)?.into_any(), t.into_any()]);
        }
        // A document the list path does not cover (Anthropic, a conversion): written whole.
        let rendered = live.render().map_err(core_error)?;
        let target = self.options.chat.to.unwrap_or(format);
        let items = live.session().items();
        let before: Vec<usize> = items
            .iter()
            .map(|item| match item.kind {
                Kind::Message(_) => payload_tokens(format, &item.raw, tokenizer),
                _ => 0,
            })
            .collect();
        let after: usize = (rendered.messages.iter())
            .map(|m| match m.source {
                Source::Item(i) if m.json == items[i].raw && target == format => before[i],
                _ => payload_tokens(target, &m.json, tokenizer),
            })
            .sum();
        let decisions = live.session().decisions();
        let actions: Vec<Action> = decisions.iter().map(|d| d.action).collect();
        let reasons: Vec<Option<Reason>> = decisions.iter().map(|d| d.reason).collect();
        let t = telemetry(
            py,
            target,
            tokenizer.name(),
            before.iter().sum(),
            after,
            &actions,
            &reasons,
        )?;
        let output = from_json_text(py, &rendered.text)?;
        let messages = match output.cast::<PyDict>() {
            Ok(doc) => {
                if let Some(system) = doc.get_item("system")? {
                    t.set_item("system", system)?;
                }
                match doc.get_item("messages")?.or(doc.get_item("input")?) {
                    Some(m) => m,
                    None => {
                        return Err(internal_error(
                            "the compiled document has no messages".into(),
                        ));
                    }
                }
            }
            Err(_) => output,
        };
        PyTuple::new(py, [messages, t.into_any()])
    }
}

#[pymethods]
impl Chat {
    /// `Chat(messages=None, preset="default", *, system=None, format=None, ...)`: the options
    /// are `compile_messages`'s.
    #[new]
    #[pyo3(signature = (
        messages = None, preset = "default", schema = None, *, system = None, format = None,
        to = None, tokenizer = "o200k_base", schema_policy = "flag", keep_tools = None,
        expand_tool = None, max_rows = None, keep_rows = None, max_lines = None,
        safety_words = None, max_keys = 64, max_value_chars = 256
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        messages: Option<&Bound<'_, PyAny>>,
        preset: &str,
        schema: Option<&Bound<'_, PyAny>>,
        system: Option<&Bound<'_, PyAny>>,
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
    ) -> PyResult<Self> {
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
        if options.from.is_some_and(|f| !f.wire().is_chat()) {
            return Err(usage_error(
                "Chat holds a chat history (openai-chat, anthropic or responses); use TraceGC for event traces".into(),
            ));
        }
        let mut state = State {
            system: match system.filter(|s| !s.is_none()) {
                Some(s) => Some(to_json_text(s, "system")?),
                None => None,
            },
            ..State::default()
        };
        if let Some(messages) = messages.filter(|m| !m.is_none()) {
            let list = items_of(messages, "messages")?;
            let texts = Self::texts(&list, 0)?;
            state.restart(&options, texts).map_err(core_error)?;
        }
        Ok(Chat {
            options,
            state: Mutex::new(state),
        })
    }

    /// Appends one message (a dict, or an SDK model) and compiles it.
    fn append(&self, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut state = self.state()?;
        let json = to_json_text(message, &format!("messages[{}]", state.given.len()))?;
        state.append(&self.options, vec![json]).map_err(core_error)
    }

    /// Appends several messages, in order.
    fn extend(&self, messages: &Bound<'_, PyAny>) -> PyResult<()> {
        let list = items_of(messages, "messages")?;
        let mut state = self.state()?;
        let texts = Self::texts(&list, state.given.len())?;
        state.append(&self.options, texts).map_err(core_error)
    }

    /// `(messages, telemetry)` for the history so far, as `compile_messages` gives them
    /// (the telemetry holds the counts and retired turns; `report()` has the rest). The
    /// message dicts are shared with later results: copy one before changing it.
    fn compiled<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let mut state = self.state()?;
        self.compiled_from(py, &mut state)
    }

    /// Compiles a whole history as `compile_messages(messages)` does, recognising the list it
    /// was given last time with messages added (the same message objects first, as an agent
    /// loop that appends to its history sends it): then only the new ones are compiled. Any
    /// other list starts over. Messages already given are not to be changed in place (a
    /// changed object at the same place is not noticed, except the last one).
    #[pyo3(signature = (messages, *, system = None))]
    fn compile<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'py, PyAny>,
        system: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let list = items_of(messages, "messages")?;
        let system = match system.filter(|s| !s.is_none()) {
            Some(s) => Some(to_json_text(s, "system")?),
            None => None,
        };
        let mut state = self.state()?;
        let known = state.last_list.len();
        let resent = state.live.is_some()
            && state.system == system
            && known <= list.len()
            && known == state.given.len()
            && state
                .last_list
                .iter()
                .zip(&list)
                .all(|(old, new)| old.bind(py).is(new))
            && match known.checked_sub(1) {
                Some(last) => to_json_text(&list[last], "messages")? == state.given[last],
                None => true,
            };
        if resent {
            let texts = Self::texts(&list[known..], known)?;
            state.append(&self.options, texts).map_err(core_error)?;
        } else {
            let texts = Self::texts(&list, 0)?;
            state.system = system;
            state.restart(&self.options, texts).map_err(core_error)?;
        }
        state.last_list = list.iter().map(|m| m.clone().unbind()).collect();
        self.compiled_from(py, &mut state)
    }

    /// The full telemetry of `compile_messages` for the history so far (decisions, receipts,
    /// register, validation): a whole compile, for inspection rather than every request.
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = {
            let state = self.state()?;
            document(state.system.as_deref(), &state.given)
        };
        let options = self.options.clone();
        let compiled =
            crate::options::core(py.detach(move || ctxgc_core::compile(&text, &options)))?;
        let report = crate::chat::telemetry(&compiled)?;
        crate::convert::to_python(py, &report)
    }

    /// Messages given so far.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.state()?.given.len())
    }

    fn __repr__(&self) -> PyResult<String> {
        let state = self.state()?;
        let format = state
            .live
            .as_ref()
            .map_or("none yet", |l| l.format().name());
        Ok(format!(
            "Chat(messages={}, format={format})",
            state.given.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::document;

    #[test]
    fn documents_are_lists_or_anthropic_requests() {
        assert_eq!(document(None, &["{}".into(), "[]".into()]), "[{},[]]");
        assert_eq!(
            document(Some("\"sys\""), &[]),
            "{\"system\":\"sys\",\"messages\":[]}"
        );
    }
}
