//! `--auto DIR`: automatic mode, as `ctxgc_core::projection::auto::AutoTrim` defines it
//! (observe the first runs, learn, trim, stop trimming a tool expanded too often), with its
//! state kept in the work directory so that learning survives restarts.
//!
//! The directory (0700, files 0600, written atomically):
//!
//! ```text
//! DIR/state.json      learned counts, per-tool statistics, the run in progress
//! DIR/ctxgc.db        originals of every trimmed output, for expand (unless --db)
//! DIR/report.html     the report, rewritten after every run (and at start)
//! DIR/traces/NNNNNN.jsonl   every finished run, full outputs included (tracetrim JSONL)
//! ```
//!
//! Originals go to a store ([`crate::receipts`]), committed before the trimmed output is
//! sent, so `expand` answers for every output ever trimmed, after a crash too. A
//! `receipts.json` left by an earlier version is imported at start (and renamed
//! `receipts.json.imported`).
//!
//! State is saved after every `expand` and every finished run, and when the proxy stops; a
//! crash loses at most the calls of the run in progress since the last save. A run still
//! open when the proxy stops (the agent never called the done tool) is closed without an
//! answer: it counts for the report, not for learning.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ctxgc_core::projection::apply::ReceiptStore;
use ctxgc_core::projection::auto::{AutoConfig, AutoTrim};
use ctxgc_core::projection::trace::Run;
use ctxgc_report::projection::render_html;
use serde_json::Value;

use crate::receipts::{StoreReceipts, read_receipts_file};
use crate::reviewed::expand_surface;
use crate::shaping::{OutputShaper, ShapeError, Shaped, ToolSurface};
use crate::workdir::{ensure_private_dir, write_private};

const STATE_FILE: &str = "state.json";
const RECEIPTS_FILE: &str = "receipts.json";
const IMPORTED_SUFFIX: &str = "imported";
/// The database of originals in the work directory, when no other is given.
pub const DB_FILE: &str = "ctxgc.db";
const REPORT_FILE: &str = "report.html";
const TRACES_DIR: &str = "traces";
const REPORT_TITLE: &str = "ctxgc proxy: automatic mode";

/// Automatic mode over a work directory.
pub struct AutoShaper {
    dir: PathBuf,
    auto: Mutex<AutoTrim<StoreReceipts>>,
}

/// Why the work directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AutoDirError {
    /// A file or directory could not be created, read or written.
    #[error("{path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The system's message.
        message: String,
    },
    /// A saved file could not be read back.
    #[error("{path}: {message} (move the file away to start learning again)")]
    Corrupt {
        /// The path.
        path: String,
        /// What is wrong.
        message: String,
    },
}

fn io_error(path: &Path, err: std::io::Error) -> AutoDirError {
    AutoDirError::Io {
        path: path.display().to_string(),
        message: err.to_string(),
    }
}

impl AutoShaper {
    /// Opens (or creates) the work directory `dir` and resumes what was learned there, with
    /// the originals in `DIR/ctxgc.db`. `config` applies to this run of the proxy (a saved
    /// state takes its counts, not its configuration).
    pub fn open(dir: &Path, config: AutoConfig) -> Result<Self, AutoDirError> {
        Self::open_with_store(dir, config, None)
    }

    /// As [`AutoShaper::open`], with the originals in the store at `db` when given.
    pub fn open_with_store(
        dir: &Path,
        config: AutoConfig,
        db: Option<&ctxgc_store::Location>,
    ) -> Result<Self, AutoDirError> {
        if let Some(note) = ensure_private_dir(dir).map_err(|e| io_error(dir, e))? {
            eprintln!("ctxgc proxy: {note}");
        }
        let traces = dir.join(TRACES_DIR);
        ensure_private_dir(&traces).map_err(|e| io_error(&traces, e))?;
        let location = db
            .cloned()
            .unwrap_or_else(|| ctxgc_store::Location::Sqlite(dir.join(DB_FILE)));
        let mut receipts = StoreReceipts::open(&location).map_err(|e| AutoDirError::Io {
            path: location.to_string(),
            message: e.to_string(),
        })?;
        import_receipts_file(dir, &mut receipts)?;
        let state_path = dir.join(STATE_FILE);
        let auto = if state_path.exists() {
            let text =
                std::fs::read_to_string(&state_path).map_err(|e| io_error(&state_path, e))?;
            let mut state = AutoTrim::<StoreReceipts>::parse_state(&text).map_err(|e| {
                AutoDirError::Corrupt {
                    path: state_path.display().to_string(),
                    message: e.to_string(),
                }
            })?;
            state.config = config;
            AutoTrim::from_state(state, receipts)
        } else {
            AutoTrim::with_store(config, receipts)
        };
        let shaper = AutoShaper {
            dir: dir.to_owned(),
            auto: Mutex::new(auto),
        };
        if let Ok(auto) = shaper.auto.lock() {
            shaper.save(&auto, true);
        }
        Ok(shaper)
    }

    /// The work directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs learned from so far, and whether outputs are being trimmed.
    pub fn progress(&self) -> (u64, bool) {
        self.auto
            .lock()
            .map(|a| (a.runs_learned(), a.is_trimming()))
            .unwrap_or((0, false))
    }

    /// Tools no longer trimmed, with why.
    pub fn disabled_tools(&self) -> Vec<(String, String)> {
        self.auto
            .lock()
            .map(|a| {
                a.disabled_tools()
                    .into_iter()
                    .map(|(t, r)| (t.to_owned(), r.to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Writes state (and the report when `everything`); a failure is reported on stderr,
    /// never to the agent, whose call has been answered already. Originals are not written
    /// here: the store has them from the moment they were trimmed.
    fn save(&self, auto: &AutoTrim<StoreReceipts>, everything: bool) {
        let mut writes = vec![(self.dir.join(STATE_FILE), auto.to_json())];
        if everything {
            writes.push((
                self.dir.join(REPORT_FILE),
                render_html(&auto.report(REPORT_TITLE)),
            ));
        }
        for (path, contents) in writes {
            if let Err(e) = write_private(&path, contents.as_bytes()) {
                eprintln!("ctxgc proxy: cannot write {}: {e}", path.display());
            }
        }
    }

    fn write_trace(&self, number: u64, run: &Run) {
        let trace = self.dir.join(TRACES_DIR).join(format!("{number:06}.jsonl"));
        if let Err(e) = write_private(&trace, run.to_tracetrim_jsonl().as_bytes()) {
            eprintln!("ctxgc proxy: cannot write {}: {e}", trace.display());
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, AutoTrim<StoreReceipts>>, ShapeError> {
        self.auto
            .lock()
            .map_err(|_| ShapeError("automatic-mode state poisoned".into()))
    }
}

/// Moves the originals of a `receipts.json` (written by earlier versions) into the store,
/// then renames the file so that it is not imported twice.
fn import_receipts_file(dir: &Path, store: &mut StoreReceipts) -> Result<(), AutoDirError> {
    let path = dir.join(RECEIPTS_FILE);
    if !path.exists() {
        return Ok(());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
    let receipts = read_receipts_file(&text).map_err(|message| AutoDirError::Corrupt {
        path: path.display().to_string(),
        message,
    })?;
    let count = receipts.len();
    for receipt in receipts {
        store.put(receipt).map_err(|e| AutoDirError::Io {
            path: store.location().to_owned(),
            message: e.to_string(),
        })?;
    }
    let done = path.with_extension(format!("json.{IMPORTED_SUFFIX}"));
    std::fs::rename(&path, &done).map_err(|e| io_error(&path, e))?;
    eprintln!(
        "ctxgc proxy: imported {count} original(s) from {} into {}",
        path.display(),
        store.location()
    );
    Ok(())
}

/// The answer out of a done call: `{"answer": "..."}`, or a bare string.
fn answer_of(arguments: &Value) -> Result<String, ShapeError> {
    match arguments {
        Value::String(s) => Ok(s.clone()),
        Value::Object(map) => match map.get("answer") {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Ok(other.to_string()),
            None => Err(ShapeError(
                "ctxgc_done: call it as {\"answer\": \"<your complete final answer>\"}".into(),
            )),
        },
        other => Ok(other.to_string()),
    }
}

impl OutputShaper for AutoShaper {
    fn shape(
        &self,
        tool: &str,
        arguments: &Value,
        raw: &str,
        _is_error: bool,
    ) -> Result<Shaped, ShapeError> {
        let mut auto = self.lock()?;
        let text = auto.output(tool, arguments, raw);
        if text == raw {
            return Ok(Shaped::unchanged(raw));
        }
        // The receipt of this call names the field groups its footer lists.
        let call = auto.state().current.calls.len().saturating_sub(1);
        let fields_hidden = auto
            .state()
            .current_refs
            .iter()
            .find(|(_, index)| **index == call)
            .and_then(|(reference, _)| auto.store().get(reference).ok().flatten())
            .map(|receipt| receipt.hidden.len())
            .unwrap_or(0);
        Ok(Shaped {
            text,
            fields_hidden,
        })
    }

    fn may_trim(&self, _tool: &str) -> bool {
        // Any tool may be trimmed once learning is done; the schema is published relaxed
        // from the start so that it never changes under a client.
        true
    }

    fn expand_tool(&self) -> Option<ToolSurface> {
        Some(expand_surface())
    }

    fn expand(&self, arguments: &Value) -> Result<String, ShapeError> {
        let mut auto = self.lock()?;
        let answer = auto
            .expand(arguments)
            .map_err(|e| ShapeError(e.to_string()));
        // Expansions move the back-off counts: keep them across a restart.
        self.save(&auto, false);
        answer
    }

    fn done_tool(&self) -> Option<ToolSurface> {
        let schema = ctxgc_core::projection::auto::done_tool();
        Some(ToolSurface {
            name: schema.name,
            description: schema.description,
            input_schema: match schema.input_schema {
                Value::Object(map) => map,
                _ => serde_json::Map::new(),
            },
        })
    }

    fn done(&self, arguments: &Value) -> Result<String, ShapeError> {
        let answer = answer_of(arguments)?;
        let mut auto = self.lock()?;
        let mut finished = auto.state().current.clone();
        finished.push_message(answer.as_str(), None);
        let summary = auto.done(&answer);
        let number = auto.state().runs_finished;
        self.write_trace(number, &finished);
        self.save(&auto, true);
        let mode = if summary.trimming {
            "outputs are trimmed with what was learned".to_owned()
        } else {
            format!(
                "observing: {} of {} runs seen before trimming starts",
                auto.runs_learned(),
                auto.state().config.min_runs
            )
        };
        Ok(format!(
            "Recorded run {number} ({} tool outputs, {} trimmed, {} expanded); {mode}. Now show the same answer.",
            summary.outputs, summary.trimmed, summary.expansions
        ))
    }

    fn savings_sink(&self) -> Option<crate::savings::SavingsSink> {
        Some(self.auto.lock().ok()?.store().savings_sink())
    }

    fn report_html(&self) -> Option<String> {
        let auto = self.auto.lock().ok()?;
        Some(render_html(&auto.report(REPORT_TITLE)))
    }

    fn flush(&self) {
        let Ok(mut auto) = self.auto.lock() else {
            return;
        };
        // The agent went away without calling the done tool: the run counts for the
        // report, not for learning (without the answer most of what it used is invisible).
        if !auto.state().current.calls.is_empty() {
            let unfinished = auto.state().current.clone();
            auto.end_without_answer();
            self.write_trace(auto.state().runs_finished, &unfinished);
        }
        self.save(&auto, true);
    }
}
