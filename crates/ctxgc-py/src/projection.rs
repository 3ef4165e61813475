//! Learned tool-output projections: `learn`, `measure`, `report`, `trim`, the `Projection`
//! class, and `AutoTrim` (observe, learn, trim, back off) for agents that run their own tools.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use ctxgc_core::projection::apply::{ReceiptStore, ReceiptStoreError, TrimReceipt};
use ctxgc_core::projection::auto::{Arguments, AutoConfig, AutoState};
use ctxgc_core::projection::counts::observe_run;
use ctxgc_core::projection::measure::MeasureOptions;
use ctxgc_core::projection::{
    AutoTrim as CoreAutoTrim, Counts, LearnOptions, Projection as CoreProjection, Report, Run,
    UsageOptions,
};
use ctxgc_core::store::Store;
use ctxgc_core::{Options, Tokenizer};
use ctxgc_report::projection::render_html;
use ctxgc_store::{AnyStore, Location};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::convert::{serialize, to_json_text, wrong_type};
use crate::errors::{expand_error, input_error, internal_error, store_error, usage_error};
use crate::options::{format, read_text, tokenizer};

/// The learner's options, as keyword arguments.
#[allow(clippy::too_many_arguments)]
fn measure_options(
    tokenizer_name: &str,
    min_calls: Option<u64>,
    min_runs: Option<u64>,
    max_used_share: f64,
    min_saving_tokens: Option<u64>,
    keep_identifying: bool,
    drop_whole_text: bool,
    tables: bool,
    count_known_values: bool,
) -> PyResult<MeasureOptions> {
    if !(0.0..=1.0).contains(&max_used_share) {
        return Err(usage_error(format!(
            "max_used_share must be between 0 and 1, not {max_used_share}"
        )));
    }
    let defaults = LearnOptions::default();
    Ok(MeasureOptions {
        learn: LearnOptions {
            min_calls: min_calls.unwrap_or(defaults.min_calls),
            min_runs: min_runs.unwrap_or(defaults.min_runs),
            max_used_share,
            keep_identifying,
            min_saving_tokens: min_saving_tokens.unwrap_or(defaults.min_saving_tokens),
            tables,
            drop_whole_text,
            recallable: false,
        },
        usage: UsageOptions {
            discount_known_values: !count_known_values,
        },
        tokenizer: tokenizer(tokenizer_name)?,
    })
}

/// Reads traces as runs. `traces` is one trace or a list of them; a trace is a path to a
/// file (any transcript ctxgc reads, a JSONL of records — one run per record — or
/// tracetrim's JSONL), or a transcript in memory (a list of messages or a request dict).
fn load_runs(
    py: Python<'_>,
    traces: &Bound<'_, PyAny>,
    from: Option<&str>,
    tokenizer: Tokenizer,
) -> PyResult<Vec<Run>> {
    let list: Vec<Bound<'_, PyAny>> = match traces.cast::<PyList>() {
        Ok(l) if l.iter().all(|t| t.cast::<PyDict>().is_ok()) && !l.is_empty() => {
            // One transcript: a list of message dicts.
            vec![traces.clone()]
        }
        Ok(l) => l.iter().collect(),
        Err(_) => match traces.cast::<PyTuple>() {
            Ok(t) => t.iter().collect(),
            Err(_) => vec![traces.clone()],
        },
    };
    if list.is_empty() {
        return Err(usage_error("give at least one trace".into()));
    }
    let options = Options {
        from: format(from)?,
        tokenizer,
        ..Options::default()
    };
    let mut inputs = Vec::new();
    for (n, trace) in list.iter().enumerate() {
        let (name, text) = if trace.cast::<PyString>().is_ok() || trace.hasattr("__fspath__")? {
            let path: PathBuf = trace.extract()?;
            (file_name(&path), read_text(&path)?)
        } else if trace.cast::<PyList>().is_ok() || trace.cast::<PyDict>().is_ok() {
            (
                format!("run{n}"),
                to_json_text(trace, &format!("traces[{n}]"))?,
            )
        } else {
            return Err(wrong_type(
                &format!("traces[{n}]"),
                "a path or a transcript (list of messages)",
                trace,
            ));
        };
        inputs.push((name, text));
    }
    py.detach(move || {
        let mut runs = Vec::new();
        for (name, text) in &inputs {
            let conversations = ctxgc_core::frontend::lower_conversations(text, &options)
                .map_err(|e| format!("{name}: {e}"))?;
            let single = conversations.len() == 1;
            for c in conversations {
                let id = if single && c.id == "0" {
                    name.clone()
                } else {
                    c.id.clone()
                };
                runs.push(Run::from_items(id, &c.items));
            }
        }
        Ok::<_, String>(runs)
    })
    .map_err(input_error)
    .and_then(|runs| {
        if runs.is_empty() {
            Err(input_error("the traces hold no runs".into()))
        } else {
            Ok(runs)
        }
    })
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// A learned projection: per tool, the fields kept and dropped with the counts behind each
/// decision. Review it (`to_json()`), edit it, apply it.
#[pyclass(module = "ctxgc._native", name = "Projection", frozen)]
pub struct Projection {
    inner: CoreProjection,
}

fn trimmed_dict<'py>(
    py: Python<'py>,
    projection: &CoreProjection,
    tool: &str,
    output: &str,
    error: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let trimmed = projection.apply_flagged(tool, output, error);
    serialize(
        py,
        &json!({
            "tool": tool,
            "text": trimmed.text,
            "outcome": trimmed.outcome,
            "untrimmed": trimmed.untrimmed,
            "hidden": trimmed.hidden,
            "hidden_values": trimmed.hidden_values,
            "tokens_before": projection.tokenizer.count(output),
            "tokens_after": projection.tokenizer.count(&trimmed.text),
            "receipt": trimmed.receipt,
        }),
    )
}

/// A tool output as text: strings as they are, other values as compact JSON.
fn output_text(value: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    match value.cast::<PyString>() {
        Ok(s) => Ok(s.to_str()?.to_owned()),
        Err(_) => to_json_text(value, name),
    }
}

#[pymethods]
impl Projection {
    /// Reads a projection from its JSON text (as `to_json()` or `ctxgc learn` write it).
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Projection> {
        CoreProjection::from_json(text)
            .map(|inner| Projection { inner })
            .map_err(|e| input_error(format!("projection: {e}")))
    }

    /// Reads a projection file.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Projection> {
        let text = read_text(&path)?;
        CoreProjection::from_json(&text)
            .map(|inner| Projection { inner })
            .map_err(|e| input_error(format!("{}: {e}", path.display())))
    }

    /// The projection as reviewable JSON text.
    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    /// Writes the projection to a file.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        std::fs::write(&path, self.inner.to_json())
            .map_err(|e| input_error(format!("{}: {e}", path.display())))
    }

    /// What the agent should receive for `output` of `tool`: the trimmed text, ending with
    /// a line that names what was hidden (or the output unchanged).
    #[pyo3(signature = (tool, output, *, error = false))]
    fn apply(&self, tool: &str, output: &Bound<'_, PyAny>, error: bool) -> PyResult<String> {
        let output = output_text(output, "output")?;
        Ok(self.inner.apply_flagged(tool, &output, error).text)
    }

    /// `apply`, with everything `ctxgc trim --json` reports: `text`, `outcome`, `hidden`,
    /// `tokens_before`, `tokens_after`, and the `receipt` that gives the original back.
    #[pyo3(signature = (tool, output, *, error = false))]
    fn trim<'py>(
        &self,
        py: Python<'py>,
        tool: &str,
        output: &Bound<'py, PyAny>,
        error: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let output = output_text(output, "output")?;
        trimmed_dict(py, &self.inner, tool, &output, error)
    }

    /// The projection as a dict (tools, kept and dropped fields, counts).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serialize(py, &self.inner)
    }

    /// Tool names the projection trims (drops at least one field of).
    #[getter]
    fn trimmed_tools(&self) -> Vec<String> {
        self.inner
            .tools
            .iter()
            .filter(|(_, t)| !t.drop.is_empty())
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn __repr__(&self) -> String {
        let dropped: usize = self.inner.tools.values().map(|t| t.drop.len()).sum();
        format!(
            "Projection(tools={}, fields_dropped={dropped})",
            self.inner.tools.len()
        )
    }
}

/// Learns a projection from traces: which fields of each tool's output the agent visibly
/// reuses later.
#[pyfunction]
#[pyo3(signature = (
    traces, *, format = None, tokenizer = "o200k_base", min_calls = None, min_runs = None,
    max_used_share = 0.0, min_saving_tokens = None, keep_identifying = true,
    drop_whole_text = false, tables = false, count_known_values = false
))]
#[allow(clippy::too_many_arguments)]
pub fn learn(
    py: Python<'_>,
    traces: &Bound<'_, PyAny>,
    format: Option<&str>,
    tokenizer: &str,
    min_calls: Option<u64>,
    min_runs: Option<u64>,
    max_used_share: f64,
    min_saving_tokens: Option<u64>,
    keep_identifying: bool,
    drop_whole_text: bool,
    tables: bool,
    count_known_values: bool,
) -> PyResult<Projection> {
    let options = measure_options(
        tokenizer,
        min_calls,
        min_runs,
        max_used_share,
        min_saving_tokens,
        keep_identifying,
        drop_whole_text,
        tables,
        count_known_values,
    )?;
    let runs = load_runs(py, traces, format, options.tokenizer)?;
    let inner = py.detach(move || {
        let mut counts = Counts::default();
        for run in &runs {
            counts.add(&observe_run(run, &options.usage, options.tokenizer).counts);
        }
        CoreProjection::learn(&counts, &options.learn, options.tokenizer)
    });
    Ok(Projection { inner })
}

/// Leave-one-out: each run trimmed with a projection learned from the others. Returns the
/// tokens removed and the misses (held-out calls where a field the agent used was hidden).
#[pyfunction]
#[pyo3(signature = (
    traces, *, format = None, tokenizer = "o200k_base", min_calls = None, min_runs = None,
    max_used_share = 0.0, min_saving_tokens = None, keep_identifying = true,
    drop_whole_text = false, tables = false, count_known_values = false
))]
#[allow(clippy::too_many_arguments)]
pub fn measure<'py>(
    py: Python<'py>,
    traces: &Bound<'py, PyAny>,
    format: Option<&str>,
    tokenizer: &str,
    min_calls: Option<u64>,
    min_runs: Option<u64>,
    max_used_share: f64,
    min_saving_tokens: Option<u64>,
    keep_identifying: bool,
    drop_whole_text: bool,
    tables: bool,
    count_known_values: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let options = measure_options(
        tokenizer,
        min_calls,
        min_runs,
        max_used_share,
        min_saving_tokens,
        keep_identifying,
        drop_whole_text,
        tables,
        count_known_values,
    )?;
    let runs = load_runs(py, traces, format, options.tokenizer)?;
    let measurement = py.detach(move || ctxgc_core::projection::measure(&runs, &options));
    serialize(py, &measurement)
}

/// The telemetry report of traces (which tools fill the context, which fields are never
/// used, suggested actions) as a dict; with `html=PATH` also the self-contained page.
#[pyfunction]
#[pyo3(signature = (traces, *, title = None, html = None, format = None, tokenizer = "o200k_base"))]
pub fn report<'py>(
    py: Python<'py>,
    traces: &Bound<'py, PyAny>,
    title: Option<String>,
    html: Option<PathBuf>,
    format: Option<&str>,
    tokenizer: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let options = measure_options(tokenizer, None, None, 0.0, None, true, false, false, false)?;
    let runs = load_runs(py, traces, format, options.tokenizer)?;
    let title = title.unwrap_or_else(|| "traces".to_owned());
    let report = py.detach(move || Report::build(&title, &runs, &options));
    if let Some(path) = html {
        std::fs::write(&path, render_html(&report))
            .map_err(|e| input_error(format!("{}: {e}", path.display())))?;
    }
    serialize(py, &report)
}

/// Trims one tool output with a projection (a `Projection`, its JSON text or a path).
#[pyfunction]
#[pyo3(signature = (projection, tool, output, *, error = false))]
pub fn trim<'py>(
    py: Python<'py>,
    projection: &Bound<'py, PyAny>,
    tool: &str,
    output: &Bound<'py, PyAny>,
    error: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let output = output_text(output, "output")?;
    if let Ok(p) = projection.cast::<Projection>() {
        return trimmed_dict(py, &p.get().inner, tool, &output, error);
    }
    let loaded = if let Ok(s) = projection.cast::<PyString>() {
        let text = s.to_str()?;
        if text.trim_start().starts_with('{') {
            Projection::from_json(text)?
        } else {
            Projection::load(PathBuf::from(text))?
        }
    } else if projection.hasattr("__fspath__")? {
        Projection::load(projection.extract()?)?
    } else {
        return Err(wrong_type(
            "projection",
            "a Projection, its JSON text or a path",
            projection,
        ));
    };
    trimmed_dict(py, &loaded.inner, tool, &output, error)
}

/// The session under which automatic mode keeps the originals of trimmed outputs.
const AUTO_CONTEXT: &str = "ctxgc-auto";
/// The state scope of each receipt's tool and hidden fields.
const AUTO_META_SCOPE: &str = "ctxgc-auto/receipt";
/// The state file in the work directory.
const STATE_FILE: &str = "auto-state.json";

#[derive(Serialize, Deserialize)]
struct Meta {
    tool: String,
    hidden: Vec<String>,
}

/// Originals of trimmed outputs in a database, so `expand` answers after restarts.
struct DbReceipts {
    store: Mutex<AnyStore>,
}

impl ReceiptStore for DbReceipts {
    fn put(&mut self, receipt: TrimReceipt) -> Result<(), ReceiptStoreError> {
        let store = self
            .store
            .get_mut()
            .map_err(|_| ReceiptStoreError("poisoned".into()))?;
        let fail = |e: ctxgc_core::store::StoreError| ReceiptStoreError(e.to_string());
        store
            .put_receipt(
                AUTO_CONTEXT,
                &receipt.reference,
                receipt.original.as_bytes(),
            )
            .map_err(fail)?;
        let meta = serde_json::to_vec(&Meta {
            tool: receipt.tool,
            hidden: receipt.hidden,
        })
        .map_err(|e| ReceiptStoreError(e.to_string()))?;
        store
            .put_state(AUTO_META_SCOPE, &receipt.reference, &meta)
            .map_err(fail)
    }

    fn get(&self, reference: &str) -> Result<Option<TrimReceipt>, ReceiptStoreError> {
        let mut store = self
            .store
            .lock()
            .map_err(|_| ReceiptStoreError("poisoned".into()))?;
        let fail = |e: ctxgc_core::store::StoreError| ReceiptStoreError(e.to_string());
        let Some(original) = store.receipt(AUTO_CONTEXT, reference).map_err(fail)? else {
            return Ok(None);
        };
        let meta: Meta = match store.state(AUTO_META_SCOPE, reference).map_err(fail)? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| ReceiptStoreError(format!("receipt {reference}: {e}")))?,
            None => Meta {
                tool: String::new(),
                hidden: Vec::new(),
            },
        };
        Ok(Some(TrimReceipt {
            reference: reference.to_owned(),
            tool: meta.tool,
            original: String::from_utf8_lossy(&original).into_owned(),
            hidden: meta.hidden,
        }))
    }
}

/// Receipts in memory or in the work directory's database.
enum Receipts {
    Memory(ctxgc_core::projection::MemoryReceipts),
    Db(DbReceipts),
}

impl ReceiptStore for Receipts {
    fn put(&mut self, receipt: TrimReceipt) -> Result<(), ReceiptStoreError> {
        match self {
            Receipts::Memory(m) => m.put(receipt),
            Receipts::Db(d) => d.put(receipt),
        }
    }
    fn get(&self, reference: &str) -> Result<Option<TrimReceipt>, ReceiptStoreError> {
        match self {
            Receipts::Memory(m) => m.get(reference),
            Receipts::Db(d) => d.get(reference),
        }
    }
}

/// Automatic mode for an agent that runs its own tools: pass every tool result through
/// `output`, answer `expand` calls with `expand`, end each run with `done(answer)`.
#[pyclass(module = "ctxgc._native", name = "AutoTrim")]
pub struct AutoTrim {
    inner: Mutex<CoreAutoTrim<Receipts>>,
    workdir: Option<PathBuf>,
}

impl AutoTrim {
    /// Runs `f` on the state with the GIL released: the lock is only ever waited for
    /// without the GIL, so a thread holding it can always take the GIL back.
    fn with_auto<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreAutoTrim<Receipts>) -> R + Send,
    ) -> PyResult<R> {
        py.detach(|| {
            let mut guard: MutexGuard<'_, CoreAutoTrim<Receipts>> = self.inner.lock().ok()?;
            Some(f(&mut guard))
        })
        .ok_or_else(|| internal_error("a previous call panicked while holding the state".into()))
    }

    /// Saves the state in the work directory (written aside, then renamed: a crash leaves
    /// the previous state whole).
    fn save(workdir: Option<&Path>, auto: &CoreAutoTrim<Receipts>) -> Result<(), String> {
        let Some(dir) = workdir else {
            return Ok(());
        };
        let path = dir.join(STATE_FILE);
        let aside = dir.join(format!("{STATE_FILE}.tmp"));
        std::fs::write(&aside, auto.to_json())
            .and_then(|()| std::fs::rename(&aside, &path))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Rewrites the report files of the work directory.
    fn write_report(workdir: Option<&Path>, auto: &CoreAutoTrim<Receipts>) -> Result<(), String> {
        let Some(dir) = workdir else {
            return Ok(());
        };
        let report = auto.report("automatic mode");
        let json = serde_json::to_string_pretty(&report).map_err(|e| format!("report: {e}"))?;
        for (name, text) in [("report.json", json), ("report.html", render_html(&report))] {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// A file of the work directory could not be written.
fn file_error(message: String) -> PyErr {
    store_error(ctxgc_core::store::StoreError::Backend {
        backend: "file",
        message,
    })
}

/// Call arguments: a dict, JSON text, or None (no arguments).
fn arguments_value(arguments: Option<&Bound<'_, PyAny>>) -> PyResult<Value> {
    match arguments.filter(|a| !a.is_none()) {
        None => Ok(Value::Object(Default::default())),
        Some(a) => match a.cast::<PyString>() {
            Ok(s) => Ok(ctxgc_core::projection::trace::parse_arguments(s.to_str()?)),
            Err(_) => {
                let text = to_json_text(a, "arguments")?;
                serde_json::from_str(&text).map_err(|e| internal_error(format!("arguments: {e}")))
            }
        },
    }
}

#[pymethods]
impl AutoTrim {
    /// `AutoTrim()` keeps everything in memory; `AutoTrim("ctxgc-data/")` keeps the learned
    /// state (`auto-state.json`), the originals of trimmed outputs (`ctxgc.db`) and the
    /// report (`report.html`, `report.json`) in that directory, so learning and `expand`
    /// survive restarts. State found there is resumed (its settings win over the arguments).
    #[new]
    #[pyo3(signature = (
        workdir = None, *, min_runs = 5, max_expand_share = 0.25, min_trimmed_to_judge = 4,
        tokenizer = "o200k_base"
    ))]
    fn new(
        py: Python<'_>,
        workdir: Option<PathBuf>,
        min_runs: u64,
        max_expand_share: f64,
        min_trimmed_to_judge: u64,
        tokenizer: &str,
    ) -> PyResult<Self> {
        if !(0.0..=1.0).contains(&max_expand_share) {
            return Err(usage_error(format!(
                "max_expand_share must be between 0 and 1, not {max_expand_share}"
            )));
        }
        let config = AutoConfig {
            min_runs,
            max_expand_share,
            min_trimmed_to_judge,
            tokenizer: crate::options::tokenizer(tokenizer)?,
            ..AutoConfig::default()
        };
        let Some(dir) = workdir else {
            let receipts =
                Receipts::Memory(ctxgc_core::projection::MemoryReceipts::with_capacity(1024));
            return Ok(AutoTrim {
                inner: Mutex::new(CoreAutoTrim::with_store(config, receipts)),
                workdir: None,
            });
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| input_error(format!("{}: {e}", dir.display())))?;
        let location = Location::Sqlite(dir.join("ctxgc.db"));
        let store = py
            .detach(|| ctxgc_store::open(&location))
            .map_err(store_error)?;
        let receipts = Receipts::Db(DbReceipts {
            store: Mutex::new(store),
        });
        let state_path = dir.join(STATE_FILE);
        let inner = if state_path.is_file() {
            let text = read_text(&state_path)?;
            let state = AutoState::from_json(&text)
                .map_err(|e| input_error(format!("{}: {e}", state_path.display())))?;
            CoreAutoTrim::from_state(state, receipts)
        } else {
            CoreAutoTrim::with_store(config, receipts)
        };
        Ok(AutoTrim {
            inner: Mutex::new(inner),
            workdir: Some(dir),
        })
    }

    /// Records a tool call and returns what the model should receive: the raw result while
    /// observing, the trimmed one after. `output(tool, result)` or, as tracetrim's
    /// `output(tool, arguments, result)`; `result` may be text or a JSON value.
    #[pyo3(signature = (tool, *args, turn = None))]
    fn output(
        &self,
        py: Python<'_>,
        tool: &str,
        args: &Bound<'_, PyTuple>,
        turn: Option<i64>,
    ) -> PyResult<String> {
        let (arguments, result) = match args.len() {
            1 => (None, args.get_item(0)?),
            2 => (Some(args.get_item(0)?), args.get_item(1)?),
            n => {
                return Err(usage_error(format!(
                    "output(tool, result) or output(tool, arguments, result): got {} arguments",
                    n + 1
                )));
            }
        };
        let arguments = arguments_value(arguments.as_ref())?;
        let raw = output_text(&result, "result")?;
        let workdir = self.workdir.as_deref();
        let (text, saved) = self.with_auto(py, |auto| {
            let text = auto.output_in_turn(tool, Arguments::Json(&arguments), &raw, turn);
            (text, AutoTrim::save(workdir, auto))
        })?;
        saved.map_err(file_error)?;
        Ok(text)
    }

    /// Answers an `expand` call: `expand(ref, fields)` or `expand(arguments)` with the
    /// call's arguments (a dict or JSON text). `fields` defaults to `["*"]`, the whole
    /// original. Raises `ExpandError` with a message written for the agent.
    #[pyo3(signature = (reference, fields = None))]
    fn expand(
        &self,
        reference: &Bound<'_, PyAny>,
        fields: Option<Vec<String>>,
    ) -> PyResult<String> {
        let arguments = if let Ok(d) = reference.cast::<PyDict>() {
            arguments_value(Some(d.as_any()))?
        } else if let Ok(s) = reference.cast::<PyString>() {
            let text = s.to_str()?;
            if text.trim_start().starts_with('{') {
                ctxgc_core::projection::trace::parse_arguments(text)
            } else {
                json!({"ref": text, "fields": fields.unwrap_or_else(|| vec!["*".to_owned()])})
            }
        } else {
            return Err(wrong_type(
                "reference",
                "a reference string or the call's arguments",
                reference,
            ));
        };
        let workdir = self.workdir.as_deref();
        let (answer, saved) = self.with_auto(reference.py(), |auto| {
            let answer = auto.expand(Arguments::Json(&arguments));
            (answer, AutoTrim::save(workdir, auto))
        })?;
        let answer = answer.map_err(expand_error)?;
        saved.map_err(file_error)?;
        Ok(answer)
    }

    /// Ends the run with the agent's final answer: learns from it, starts trimming once
    /// `min_runs` runs are in, and rewrites the report. Returns the run's summary.
    fn done<'py>(&self, py: Python<'py>, answer: &str) -> PyResult<Bound<'py, PyAny>> {
        let workdir = self.workdir.as_deref();
        let (summary, saved) = self.with_auto(py, |auto| {
            let summary = auto.done(answer);
            let saved =
                AutoTrim::save(workdir, auto).and_then(|()| AutoTrim::write_report(workdir, auto));
            (summary, saved)
        })?;
        saved.map_err(file_error)?;
        serialize(py, &summary)
    }

    /// Ends the run without an answer: it counts for the report, not for learning.
    fn end_without_answer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let workdir = self.workdir.as_deref();
        let (summary, saved) = self.with_auto(py, |auto| {
            let summary = auto.end_without_answer();
            let saved =
                AutoTrim::save(workdir, auto).and_then(|()| AutoTrim::write_report(workdir, auto));
            (summary, saved)
        })?;
        saved.map_err(file_error)?;
        serialize(py, &summary)
    }

    /// Records the run's system prompt.
    fn prompt(&self, py: Python<'_>, text: &str) -> PyResult<()> {
        self.with_auto(py, |auto| auto.prompt(text))
    }

    /// Records a user turn (values in it are known to the agent before any tool output).
    fn user(&self, py: Python<'_>, text: &str) -> PyResult<()> {
        self.with_auto(py, |auto| auto.user(text))
    }

    /// Records an agent message that is not the final answer.
    fn message(&self, py: Python<'_>, text: &str) -> PyResult<()> {
        self.with_auto(py, |auto| auto.message(text))
    }

    /// The `expand` tool to offer the model: `{"name", "description", "input_schema"}`.
    #[getter]
    fn expand_tool<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serialize(py, &ctxgc_core::projection::expand_tool())
    }

    /// The telemetry report of every finished run, as a dict.
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let report = self.with_auto(py, |auto| auto.report("automatic mode"))?;
        serialize(py, &report)
    }

    /// The report as a self-contained HTML page.
    fn report_html(&self, py: Python<'_>) -> PyResult<String> {
        self.with_auto(py, |auto| render_html(&auto.report("automatic mode")))
    }

    /// True once outputs are trimmed.
    #[getter]
    fn is_trimming(&self, py: Python<'_>) -> PyResult<bool> {
        self.with_auto(py, |auto| auto.is_trimming())
    }

    /// Runs with an answer learned from.
    #[getter]
    fn runs_learned(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_auto(py, |auto| auto.runs_learned())
    }

    /// The projection in force (None while observing).
    #[getter]
    fn projection(&self, py: Python<'_>) -> PyResult<Option<Projection>> {
        let projection = self.with_auto(py, |auto| auto.projection().cloned())?;
        Ok(projection.map(|inner| Projection { inner }))
    }

    /// Tools no longer trimmed, with why.
    #[getter]
    fn disabled_tools(
        &self,
        py: Python<'_>,
    ) -> PyResult<std::collections::BTreeMap<String, String>> {
        self.with_auto(py, |auto| {
            auto.disabled_tools()
                .into_iter()
                .map(|(t, r)| (t.to_owned(), r.to_owned()))
                .collect()
        })
    }

    /// Per-tool statistics: outputs, trimmed, expanded, tokens in and out.
    #[getter]
    fn tool_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.with_auto(py, |auto| auto.tool_stats().clone())?;
        serialize(py, &stats)
    }

    /// The whole state as JSON text (what the work directory keeps).
    fn state_json(&self, py: Python<'_>) -> PyResult<String> {
        self.with_auto(py, |auto| auto.to_json())
    }

    /// The work directory, or None in memory.
    #[getter]
    fn workdir(&self) -> Option<PathBuf> {
        self.workdir.clone()
    }
}
