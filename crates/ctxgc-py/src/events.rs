//! Structured event traces: `compact_events` (single shot) and the `TraceGC` session (append
//! as events happen, compact on demand; in memory, or stored in SQLite or PostgreSQL).

use std::sync::{Mutex, MutexGuard};

use std::sync::Arc;

use ctxgc_core::frontend::events::{EventOptions, lower_event};
use ctxgc_core::ir::Kind;
use ctxgc_core::live_report::LiveReport;
use ctxgc_core::plan::{Action, Decision};
use ctxgc_core::store::{StoreError, StoredSession};
use ctxgc_core::{Format, Item, Options, Receipt, Session};
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

/// What a compaction hands to Python, gathered while the session is locked (and the GIL
/// released). Per-item Python objects (ids, events, decisions, receipts) are built only for
/// the items listed in `fresh` (new, or whose decision changed) and reused for the others.
struct Compaction {
    prompt: Arc<String>,
    tokens_before: usize,
    tokens_after: usize,
    tokenizer: &'static str,
    /// Items in the session.
    len: usize,
    /// The compaction's number in its session: when two threads compact at once, objects
    /// from the later one are never replaced by the earlier one's.
    seq: u64,
    /// For each item from `first_new` on: its id and original text.
    new_items: Vec<(String, String)>,
    first_new: usize,
    /// Each stale position's decision and receipt, in the order of `stale`.
    stale: Vec<usize>,
    decisions: Vec<Decision>,
    receipts: Vec<Option<Receipt>>,
    /// Positions retired or rewritten, in input order.
    pruned: Vec<usize>,
    /// Positions kept as they are, in prompt order (edge injections left out).
    kept: Vec<usize>,
    protected: Vec<usize>,
    warnings: Vec<String>,
}

impl Compaction {
    /// Gathers the result of the last update of `report`; `known` is how many items the
    /// Python side already holds objects for.
    fn of(session: &Session, report: &mut LiveReport, known: usize, seq: u64) -> Compaction {
        let len = session.items().len();
        let changed = report.changed();
        let first_new = if changed.is_none() || known > len {
            0
        } else {
            known
        };
        let stale: Vec<usize> = match changed {
            Some(list) => list
                .iter()
                .copied()
                .filter(|&i| i < first_new)
                .chain(first_new..len)
                .collect(),
            None => (0..len).collect(),
        };
        let new_items = session.items()[first_new..]
            .iter()
            .map(|item| (item.id.clone(), item.raw.clone()))
            .collect();
        let decisions = stale
            .iter()
            .map(|&i| report.decisions()[i].clone())
            .collect();
        let receipts = stale.iter().map(|&i| report.receipt(session, i)).collect();
        let pruned = (report.decisions().iter().enumerate())
            .filter(|(_, d)| d.action != Action::Keep)
            .map(|(i, _)| i)
            .collect();
        let plans = report.plans();
        let kept = session
            .render_order()
            .into_iter()
            .filter(|&i| {
                plans[i].action() == Action::Keep
                    && !matches!(session.items()[i].kind, Kind::EdgeInjection { .. })
            })
            .collect();
        let protected = (0..len).filter(|&i| session.is_protected(i)).collect();
        Compaction {
            prompt: report.shared_prompt(),
            tokens_before: report.tokens_before(),
            tokens_after: report.tokens_after(),
            tokenizer: report.tokenizer().name(),
            len,
            seq,
            new_items,
            first_new,
            stale,
            decisions,
            receipts,
            pruned,
            kept,
            protected,
            warnings: session.warnings().iter().map(|w| w.to_string()).collect(),
        }
    }
}

/// The Python objects of a session's items, built once and shared by every result: each
/// event's id, its original as a dict, its decision and its receipt.
#[derive(Default)]
struct PyItems {
    ids: Vec<Py<PyString>>,
    /// Originals, parsed when a result first lists them.
    raws: Vec<String>,
    events: Vec<Option<Py<PyAny>>>,
    decisions: Vec<Py<PyAny>>,
    receipts: Vec<Option<Py<PyAny>>>,
    /// The compaction each item's decision and receipt objects come from.
    seqs: Vec<u64>,
}

impl PyItems {
    fn event(&mut self, py: Python<'_>, i: usize) -> PyResult<Py<PyAny>> {
        if let Some(event) = &self.events[i] {
            return Ok(event.clone_ref(py));
        }
        let event = from_json_text(py, &self.raws[i])?.unbind();
        self.events[i] = Some(event.clone_ref(py));
        Ok(event)
    }

    /// Brings the objects up to date with `c`, then builds its result dict in TraceGC's shape:
    /// `prompt`, `tokens_before`, `tokens_after`, `pruned_ids`, `receipts` (each with the
    /// original `event`), `compact_events` (the surviving events, in prompt order), plus
    /// `protected_ids`, `decisions` and `warnings`.
    fn result<'py>(&mut self, py: Python<'py>, c: Compaction) -> PyResult<Bound<'py, PyDict>> {
        self.ids.truncate(c.first_new);
        self.raws.truncate(c.first_new);
        self.events.truncate(c.first_new);
        for (id, raw) in c.new_items {
            self.ids.push(PyString::new(py, &id).unbind());
            self.raws.push(raw);
            self.events.push(None);
        }
        self.decisions.resize_with(c.len, || py.None());
        self.receipts.resize_with(c.len, || None);
        self.seqs.resize(c.len, 0);
        for ((&i, decision), receipt) in c.stale.iter().zip(&c.decisions).zip(&c.receipts) {
            if self.seqs[i] > c.seq {
                continue;
            }
            self.seqs[i] = c.seq;
            self.decisions[i] = serialize(py, decision)?.unbind();
            self.receipts[i] = match receipt {
                Some(receipt) => {
                    let entry = serialize(py, receipt)?;
                    if let Ok(entry) = entry.cast::<PyDict>() {
                        entry.set_item("event", self.event(py, i)?)?;
                    }
                    Some(entry.unbind())
                }
                None => None,
            };
        }
        let dict = PyDict::new(py);
        dict.set_item("prompt", PyString::new(py, &c.prompt))?;
        dict.set_item("tokens_before", c.tokens_before)?;
        dict.set_item("tokens_after", c.tokens_after)?;
        dict.set_item("tokenizer", c.tokenizer)?;
        let mut kept = Vec::with_capacity(c.kept.len());
        for &i in &c.kept {
            kept.push(self.event(py, i)?);
        }
        let ids =
            |positions: &[usize]| PyList::new(py, positions.iter().map(|&i| self.ids[i].bind(py)));
        dict.set_item("pruned_ids", ids(&c.pruned)?)?;
        let receipts = c
            .pruned
            .iter()
            .filter_map(|&i| self.receipts[i].as_ref().map(|r| r.bind(py)));
        dict.set_item("receipts", PyList::new(py, receipts)?)?;
        dict.set_item("compact_events", PyList::new(py, kept)?)?;
        dict.set_item("protected_ids", ids(&c.protected)?)?;
        let decisions = self.decisions.iter().map(|d| d.bind(py));
        dict.set_item("decisions", PyList::new(py, decisions)?)?;
        dict.set_item("warnings", c.warnings)?;
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
        let mut report = LiveReport::new(options.tokenizer);
        report.update(&session, None);
        Ok::<_, ctxgc_core::Error>(Compaction::of(&session, &mut report, 0, 1))
    }))?;
    PyItems::default().result(py, compaction)
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

/// A session and the report kept up to date with it.
struct Live {
    backend: Backend,
    report: LiveReport,
    /// Compactions so far.
    compactions: u64,
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

    fn take_changes(&mut self) -> Option<Vec<usize>> {
        match self {
            Backend::Memory(session) => session.take_changes(),
            Backend::Stored(stored) => stored.take_changes(),
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
    backend: Mutex<Live>,
    /// Python objects of the items, reused by every result; only touched with the GIL held.
    py_items: Mutex<PyItems>,
    events: EventOptions,
    context_id: String,
    location: Option<String>,
}

impl TraceGc {
    /// The items' Python objects. Taken with the GIL held and released before the GIL is, so
    /// it is never waited for by a thread that another one waits on.
    fn py_items(&self) -> PyResult<MutexGuard<'_, PyItems>> {
        self.py_items
            .lock()
            .map_err(|_| internal_error("a previous call panicked while building a result".into()))
    }

    /// Runs `f` on the backend with the GIL released: the lock is only ever waited for
    /// without the GIL, so a thread holding it can always take the GIL back.
    fn with_backend<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Backend) -> R + Send,
    ) -> PyResult<R> {
        self.with_live(py, |live| f(&mut live.backend))
    }

    /// [`TraceGc::with_backend`] with the report too.
    fn with_live<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Live) -> R + Send,
    ) -> PyResult<R> {
        py.detach(|| {
            let mut guard: MutexGuard<'_, Live> = self.backend.lock().ok()?;
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
            backend: Mutex::new(Live {
                backend,
                report: LiveReport::new(options.tokenizer),
                compactions: 0,
            }),
            py_items: Mutex::new(PyItems::default()),
            events: options.events,
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
    ///
    /// It costs in proportion to what was appended since the last compaction and what that
    /// changed (plus writing out the prompt): the plans, lines and counts of the other events
    /// are kept from before. The dicts inside the result (events, decisions, receipts) are
    /// shared with later results: copy one before changing it.
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let known = self.py_items()?.ids.len();
        let compaction = self
            .with_live(py, |live| {
                live.backend.compile()?;
                let changes = live.backend.take_changes();
                live.report.update(live.backend.session(), changes);
                live.compactions += 1;
                Ok::<_, StoreError>(Compaction::of(
                    live.backend.session(),
                    &mut live.report,
                    known,
                    live.compactions,
                ))
            })?
            .map_err(store_error)?;
        self.py_items()?.result(py, compaction)
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
