//! Structured event traces: `compact_events` (single shot) and the `TraceGC` session (append
//! as events happen, compact on demand; in memory, or stored in SQLite or PostgreSQL).

use std::sync::{Mutex, MutexGuard};

use ctxgc_core::compile::report_events;
use ctxgc_core::frontend::events::{EventOptions, lower_event};
use ctxgc_core::ir::Kind;
use ctxgc_core::plan::Action;
use ctxgc_core::store::{StoreError, StoredSession};
use ctxgc_core::{Compiled, Format, Item, Options, Session, Tokenizer};
use ctxgc_store::{AnyStore, Location};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::Value;

use crate::convert::{from_json_text, serialize, to_json_text, wrong_type};
use crate::errors::{core_error, internal_error, store_error, usage_error};
use crate::options::{core, event_options, input_text};

/// How many times an append catches up and retries when other writers keep appending first
/// (as `ctxgc session append` does).
const APPEND_ATTEMPTS: usize = 100;

/// What a compaction gives back, gathered while the session is locked (and the GIL released).
struct Compaction {
    compiled: Compiled,
    /// Original text of each receipt's item.
    receipt_originals: Vec<Option<String>>,
    /// Original text of each kept event, in prompt order.
    kept: Vec<String>,
    /// Ids of protected events.
    protected: Vec<String>,
}

impl Compaction {
    fn of(session: &Session, compiled: Compiled) -> Compaction {
        let receipt_originals = compiled
            .receipts
            .iter()
            .map(|r| {
                session
                    .position(&r.id)
                    .map(|i| session.items()[i].raw.clone())
            })
            .collect();
        let kept = session
            .render_order()
            .into_iter()
            .filter(|&i| {
                session.plan_of(i).action() == Action::Keep
                    && !matches!(session.items()[i].kind, Kind::EdgeInjection { .. })
            })
            .map(|i| session.items()[i].raw.clone())
            .collect();
        let protected = (0..session.items().len())
            .filter(|&i| session.is_protected(i))
            .map(|i| session.items()[i].id.clone())
            .collect();
        Compaction {
            compiled,
            receipt_originals,
            kept,
            protected,
        }
    }

    /// The result dict, in TraceGC's shape: `prompt`, `tokens_before`, `tokens_after`,
    /// `pruned_ids`, `receipts` (each with the original `event`), `compact_events` (the
    /// surviving events, in prompt order), plus `protected_ids`, `decisions` and `warnings`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let compiled = &self.compiled;
        let dict = PyDict::new(py);
        dict.set_item("prompt", &compiled.output)?;
        dict.set_item("tokens_before", compiled.tokens_before)?;
        dict.set_item("tokens_after", compiled.tokens_after)?;
        dict.set_item("tokenizer", compiled.tokenizer)?;
        let pruned: Vec<&str> = compiled
            .decisions
            .iter()
            .filter(|d| d.action != Action::Keep)
            .map(|d| d.id.as_str())
            .collect();
        dict.set_item("pruned_ids", pruned)?;
        let receipts = PyList::empty(py);
        for (receipt, original) in compiled.receipts.iter().zip(&self.receipt_originals) {
            let entry = serialize(py, receipt)?;
            if let (Ok(entry), Some(original)) = (entry.cast::<PyDict>(), original) {
                entry.set_item("event", from_json_text(py, original)?)?;
            }
            receipts.append(entry)?;
        }
        dict.set_item("receipts", receipts)?;
        let kept = PyList::empty(py);
        for raw in &self.kept {
            kept.append(from_json_text(py, raw)?)?;
        }
        dict.set_item("compact_events", kept)?;
        dict.set_item("protected_ids", &self.protected)?;
        dict.set_item("decisions", serialize(py, &compiled.decisions)?)?;
        let warnings: Vec<String> = compiled.warnings.iter().map(|w| w.to_string()).collect();
        dict.set_item("warnings", warnings)?;
        Ok(dict)
    }
}

/// Compacts a whole trace at once and returns the result dict (see the package docs).
#[pyfunction]
#[pyo3(signature = (
    events, *, protect_importance = 8.0, protect_tags = None, allow_unknown = false,
    tokenizer = "o200k_base"
))]
pub fn compact_events<'py>(
    py: Python<'py>,
    events: &Bound<'py, PyAny>,
    protect_importance: f64,
    protect_tags: Option<Vec<String>>,
    allow_unknown: bool,
    tokenizer: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let options = event_options(protect_importance, protect_tags, allow_unknown, tokenizer)?;
    if events.cast::<PyString>().is_err()
        && events.cast::<PyList>().is_err()
        && events.cast::<PyTuple>().is_err()
        && events.cast::<PyDict>().is_err()
    {
        return Err(wrong_type(
            "events",
            "a list of event dicts, {\"events\": [...]} or JSON text",
            events,
        ));
    }
    let text = input_text(events, "events")?;
    let compaction = core(py.detach(move || {
        let session = ctxgc_core::compile::compile_event_session(&text, &options)?;
        let compiled = report_events(&session, options.tokenizer);
        Ok::<_, ctxgc_core::Error>(Compaction::of(&session, compiled))
    }))?;
    compaction.to_dict(py)
}

/// Why an append failed.
enum AppendError {
    Core(ctxgc_core::Error),
    Store(StoreError),
}

impl AppendError {
    fn into_py_err(self) -> PyErr {
        match self {
            AppendError::Core(e) => core_error(e),
            AppendError::Store(e) => store_error(e),
        }
    }
}

/// Where a `TraceGC` keeps its events.
enum Backend {
    Memory(Box<Session>),
    Stored(Box<StoredSession<AnyStore>>),
}

impl Backend {
    fn session(&self) -> &Session {
        match self {
            Backend::Memory(s) => s,
            Backend::Stored(s) => s.session(),
        }
    }

    fn append(&mut self, items: Vec<Item>) -> Result<(), AppendError> {
        match self {
            Backend::Memory(session) => session.extend(items).map_err(AppendError::Core),
            Backend::Stored(stored) => {
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    match stored.append(Format::Events, items.clone()) {
                        Ok(_) => return Ok(()),
                        Err(StoreError::Conflict { .. }) if attempts < APPEND_ATTEMPTS => {
                            stored.refresh().map_err(AppendError::Store)?;
                        }
                        Err(err) => return Err(AppendError::Store(err)),
                    }
                }
            }
        }
    }

    fn compile(&mut self) -> Result<(), StoreError> {
        match self {
            Backend::Memory(session) => {
                session.compile();
                Ok(())
            }
            Backend::Stored(stored) => stored.compile(),
        }
    }
}

/// An agent's event history: append events as they happen, compact on demand. Compaction
/// costs in proportion to what was appended since the last one.
#[pyclass(module = "ctxgc._native", name = "TraceGC")]
pub struct TraceGc {
    backend: Mutex<Backend>,
    events: EventOptions,
    tokenizer: Tokenizer,
    context_id: String,
    location: Option<String>,
}

impl TraceGc {
    /// Runs `f` on the backend with the GIL released: the lock is only ever waited for
    /// without the GIL, so a thread holding it can always take the GIL back.
    fn with_backend<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Backend) -> R + Send,
    ) -> PyResult<R> {
        py.detach(|| {
            let mut guard: MutexGuard<'_, Backend> = self.backend.lock().ok()?;
            Some(f(&mut guard))
        })
        .ok_or_else(|| internal_error("a previous call panicked while holding the session".into()))
    }

    /// Lowers events given as dicts or JSON texts, numbered from `start`.
    fn lower(&self, events: &[Bound<'_, PyAny>], start: usize) -> PyResult<Vec<Item>> {
        let mut items = Vec::with_capacity(events.len());
        let mut problems = Vec::new();
        for (offset, event) in events.iter().enumerate() {
            let index = start + offset;
            let raw = match event.cast::<PyString>() {
                Ok(s) => s.to_str()?.to_owned(),
                Err(_) if event.cast::<PyDict>().is_ok() => {
                    to_json_text(event, &format!("event {index}"))?
                }
                Err(_) => {
                    return Err(wrong_type(
                        &format!("event {index}"),
                        "a dict or JSON text",
                        event,
                    ));
                }
            };
            let value: Value = match serde_json::from_str(&raw) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(ctxgc_core::Diagnostic::new(
                        index,
                        None,
                        None,
                        format!("malformed JSON: {e}"),
                    ));
                    continue;
                }
            };
            match lower_event(index, &raw, value, &self.events) {
                Ok(item) => items.push(item),
                Err(mut p) => problems.append(&mut p),
            }
        }
        if problems.is_empty() {
            Ok(items)
        } else {
            Err(core_error(ctxgc_core::Error::Invalid(problems)))
        }
    }

    fn add(&self, py: Python<'_>, events: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
        let start = self.with_backend(py, |b| b.session().items().len())?;
        let items = self.lower(&events, start)?;
        self.with_backend(py, |b| b.append(items))?
            .map_err(|e| e.into_py_err())
    }
}

#[pymethods]
impl TraceGc {
    /// `TraceGC()` keeps events in memory; `TraceGC(db="ctxgc.db")` (a SQLite file) or
    /// `TraceGC(db="postgres://user@host/db")` keeps them in a database under `context_id`,
    /// so a later `TraceGC` with the same `db` and `context_id` carries on where this one
    /// stopped (from any process).
    #[new]
    #[pyo3(signature = (
        db = None, context_id = None, *, protect_importance = 8.0, protect_tags = None,
        allow_unknown = false, tokenizer = "o200k_base"
    ))]
    fn new(
        py: Python<'_>,
        db: Option<&Bound<'_, PyAny>>,
        context_id: Option<String>,
        protect_importance: f64,
        protect_tags: Option<Vec<String>>,
        allow_unknown: bool,
        tokenizer: &str,
    ) -> PyResult<Self> {
        let options: Options =
            event_options(protect_importance, protect_tags, allow_unknown, tokenizer)?;
        let context_id = context_id.unwrap_or_else(|| "default".to_owned());
        if context_id.trim().is_empty() {
            return Err(usage_error("context_id must not be empty".into()));
        }
        let template = Session::new(options.retention.clone());
        let (backend, location) = match db.filter(|d| !d.is_none()) {
            None => (Backend::Memory(Box::new(template)), None),
            Some(db) => {
                let spec: String = if let Ok(s) = db.cast::<PyString>() {
                    s.to_str()?.to_owned()
                } else if db.hasattr("__fspath__")? {
                    let path: std::path::PathBuf = db.extract()?;
                    path.display().to_string()
                } else {
                    return Err(wrong_type("db", "a path or a postgres:// URL", db));
                };
                let location = Location::parse(&spec);
                let shown = location.to_string();
                let id = context_id.clone();
                let stored = py.detach(move || {
                    let store = ctxgc_store::open(&location)?;
                    StoredSession::open(store, &id, template)
                });
                let stored = stored.map_err(|e| match e {
                    StoreError::Backend { .. } => store_error(StoreError::Backend {
                        backend: "database",
                        message: format!("{shown}: {e}"),
                    }),
                    other => store_error(other),
                })?;
                (Backend::Stored(Box::new(stored)), Some(shown))
            }
        };
        Ok(TraceGc {
            backend: Mutex::new(backend),
            events: options.events,
            tokenizer: options.tokenizer,
            context_id,
            location,
        })
    }

    /// Validates and appends one event (a dict, or its JSON text, kept byte for byte).
    /// Invalid events raise `InputError` naming the field; nothing is appended then.
    fn add_event(&self, event: &Bound<'_, PyAny>) -> PyResult<()> {
        self.add(event.py(), vec![event.clone()])
    }

    /// Appends several events as one batch: all or none (references may point forward
    /// within the batch).
    fn add_events(&self, events: &Bound<'_, PyAny>) -> PyResult<()> {
        let list: Vec<Bound<'_, PyAny>> = if let Ok(l) = events.cast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = events.cast::<PyTuple>() {
            t.iter().collect()
        } else {
            return Err(wrong_type("events", "a list of events", events));
        };
        self.add(events.py(), list)
    }

    /// Compacts everything appended so far; returns the result dict (`prompt`,
    /// `tokens_before`, `tokens_after`, `pruned_ids`, `receipts`, `compact_events`, ...).
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let tokenizer = self.tokenizer;
        let compaction = self
            .with_backend(py, |backend| {
                backend.compile()?;
                let compiled = report_events(backend.session(), tokenizer);
                Ok::<_, StoreError>(Compaction::of(backend.session(), compiled))
            })?
            .map_err(store_error)?;
        compaction.to_dict(py)
    }

    /// The original of event `id`, whatever was decided for it: the event dict, or with
    /// `raw=True` its exact JSON text. Unknown ids raise `UsageError`.
    #[pyo3(signature = (id, *, raw = false))]
    fn get_receipt<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        raw: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let original = self
            .with_backend(py, |backend| match backend {
                Backend::Memory(session) => {
                    Ok(session.position(id).map(|i| session.items()[i].raw.clone()))
                }
                Backend::Stored(stored) => stored
                    .receipt(id)
                    .map(|b| b.map(|bytes| String::from_utf8_lossy(&bytes).into_owned())),
            })?
            .map_err(store_error)?;
        let original = original.ok_or_else(|| {
            usage_error(format!(
                "no item with id {id:?} in session {:?}",
                self.context_id
            ))
        })?;
        if raw {
            Ok(PyString::new(py, &original).into_any())
        } else {
            from_json_text(py, &original)
        }
    }

    /// What was decided for event `id` at the last compaction: `{"id", "action", "reason",
    /// "by", "note"}`.
    fn decision<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let decision = self.with_backend(py, |backend| {
            let session = backend.session();
            session.position(id).map(|i| session.decision(i))
        })?;
        let decision = decision.ok_or_else(|| {
            usage_error(format!(
                "no item with id {id:?} in session {:?}",
                self.context_id
            ))
        })?;
        serialize(py, &decision)
    }

    /// Every event appended so far, in order, as dicts.
    #[getter]
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let raws: Vec<String> = self.with_backend(py, |backend| {
            backend
                .session()
                .items()
                .iter()
                .map(|i| i.raw.clone())
                .collect()
        })?;
        let list = PyList::empty(py);
        for raw in &raws {
            list.append(from_json_text(py, raw)?)?;
        }
        Ok(list)
    }

    /// The session's id in its database.
    #[getter]
    fn context_id(&self) -> &str {
        &self.context_id
    }

    /// The database (a password in a URL is shown as `***`), or None in memory.
    #[getter]
    fn db(&self) -> Option<&str> {
        self.location.as_deref()
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_backend(py, |b| b.session().items().len())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let n = self.with_backend(py, |b| b.session().items().len())?;
        Ok(match &self.location {
            Some(db) => format!(
                "TraceGC(db={db:?}, context_id={:?}, events={n})",
                self.context_id
            ),
            None => format!("TraceGC(events={n})"),
        })
    }
}
