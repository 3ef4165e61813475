//! Helpers shared by the store's behaviour tests.
#![allow(dead_code)] // each test file uses its own share of these

use std::path::PathBuf;

use ctxgc_core::frontend::events::lower_events;
use ctxgc_core::{Item, Options};
use ctxgc_store::Location;
use ctxgc_store::testing::TestDb;

/// Lowers an event trace.
pub fn items(text: &str) -> Vec<Item> {
    lower_events(text, &Default::default()).expect("test trace lowers")
}

/// One `set_var` event, as JSON text.
pub fn set_var(id: &str, ts: u64, key: &str, value: u64) -> String {
    format!(r#"{{"id":"{id}","type":"set_var","timestamp":{ts},"key":"{key}","value":{value}}}"#)
}

/// The anchor traces of the shared fixtures (event traces), by name; empty with a note when
/// the fixtures are not beside the repository.
pub fn anchor_traces() -> Vec<(String, String)> {
    let dir = std::env::var_os("CTXGC_ANCHORS").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/anchor-fixtures/tracegc"
            ))
        },
        PathBuf::from,
    );
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("note: no anchor fixtures at {}", dir.display());
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("fixture is readable UTF-8");
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    out.sort();
    out
}

/// The anchor traces and two generated ones: always at least the generated ones.
pub fn traces() -> Vec<(String, String)> {
    let mut out = anchor_traces();
    out.push(("synth-600".into(), ctxgc_core::synth::events_jsonl(600, 3)));
    out.push((
        "synth-2000".into(),
        ctxgc_core::synth::events_jsonl(2000, 11),
    ));
    out
}

/// Splits a trace's items into consecutive batches that can be appended one after another:
/// no item refers to an item of a later batch. Batch sizes vary (1, 2, 3, ... `max`).
pub fn append_batches(items: Vec<Item>, max: usize) -> Vec<Vec<Item>> {
    let position: std::collections::HashMap<String, usize> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (item.id.clone(), i))
        .collect();
    let mut batches = Vec::new();
    let mut current = Vec::new();
    let mut reach = 0; // the furthest item the current batch refers to
    let mut want = 1;
    for (i, item) in items.into_iter().enumerate() {
        for (_, target) in item.references() {
            if let Some(&t) = position.get(target) {
                reach = reach.max(t);
            }
        }
        current.push(item);
        if reach <= i && current.len() >= want {
            batches.push(std::mem::take(&mut current));
            want = want % max + 1;
        }
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// Compiles a whole trace the way `ctxgc compile` does.
pub fn compile_whole(text: &str) -> ctxgc_core::Compiled {
    ctxgc_core::compile(text, &Options::default()).expect("trace compiles")
}

/// Runs SQL directly on a test database (to damage it on purpose).
pub fn raw_sql(db: &TestDb, sql: &str) {
    match &db.location {
        Location::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).expect("sqlite opens");
            conn.execute_batch(sql).expect("raw SQL runs");
        }
        Location::Postgres(url) => {
            let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connects");
            client.batch_execute(sql).expect("raw SQL runs");
        }
    }
}
