//! Store benchmarks, on SQLite and (when it answers) PostgreSQL.
//!
//! - `append/{sqlite,postgres}`: one item per transaction, each acknowledged only once
//!   durable (SQLite `synchronous = FULL`; PostgreSQL `synchronous_commit = on`). Reported
//!   as elements per second: appends per second.
//! - `append_batch/{sqlite,postgres}`: 1000 items per transaction, reported as items per
//!   second.
//! - `resume_100k/full_compile`: a 100k-event trace from its text to an up-to-date plan
//!   (lower, validate, run the passes).
//! - `resume_100k/full_render`: the same, plus rendering the prompt.
//! - `resume_100k/full_report`: `ctxgc compile` of the trace: the same, plus the exact token
//!   counts of the report.
//! - `resume_100k/{sqlite,postgres}_compile`: a stored 100k-event session: open the database,
//!   resume from its snapshot, append one event durably, bring the plan up to date.
//! - `resume_100k/{sqlite,postgres}_render` and `_report`: the same, plus rendering, plus the
//!   token counts (`report_events`, what `ctxgc session compile` prints).
//! - `resume_100k/{sqlite,postgres}_warm_compile`: an instance that keeps the session open
//!   catches up with the store, appends one event durably and brings the plan up to date.
//!
//! Run: `cargo bench -p ctxgc-store`. The PostgreSQL half uses `CTXGC_TEST_PG` or
//! `postgres://postgres@127.0.0.1:5432/test`, in a schema of its own that is dropped after.

use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ctxgc_core::compile::report_events;
use ctxgc_core::frontend::events::lower_events;
use ctxgc_core::render::prompt;
use ctxgc_core::store::StoredSession;
use ctxgc_core::{Format, Item, Options, Session};
use ctxgc_store::Store;
use ctxgc_store::testing::{TestDb, test_databases};

const SESSION_EVENTS: usize = 100_000;

/// How far a resumed session is taken.
#[derive(Clone, Copy)]
enum Upto {
    /// An up-to-date plan.
    Compile,
    /// Plus the rendered prompt.
    Render,
    /// Plus the exact token counts (`ctxgc session compile`).
    Report,
}

/// A `set_var` event with a fresh id, following `parent`.
fn event(n: u64, parent: Option<&str>) -> Item {
    let parent = parent.map_or(String::new(), |p| format!(r#","parent_id":"{p}""#));
    let raw = format!(
        r#"{{"id":"x{n}","type":"set_var","timestamp":{}{parent},"key":"var_{}","value":{n}}}"#,
        10_000_000 + n,
        n % 50
    );
    let mut items = lower_events(&raw, &Default::default()).expect("valid event");
    items.remove(0)
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(1));
    for db in test_databases() {
        let mut store = db.open().expect("store opens");
        let next = Cell::new(0u64);
        group.bench_function(db.backend, |b| {
            b.iter_batched(
                || {
                    let n = next.get();
                    next.set(n + 1);
                    (n, event(n, None))
                },
                |(n, item)| {
                    store
                        .append("bench", Format::Events, n, std::slice::from_ref(&item))
                        .expect("append")
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();

    let mut group = c.benchmark_group("append_batch");
    let batch = 1000u64;
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(batch));
    for db in test_databases() {
        let mut store = db.open().expect("store opens");
        let next = Cell::new(0u64);
        group.bench_function(db.backend, |b| {
            b.iter_batched(
                || {
                    let first = next.get();
                    next.set(first + batch);
                    let items: Vec<Item> = (first..first + batch).map(|n| event(n, None)).collect();
                    (first, items)
                },
                |(first, items)| {
                    store
                        .append("bench", Format::Events, first, &items)
                        .expect("append")
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

/// Stores a 100k-event session and its snapshot; returns the last event's id.
fn stored_session(db: &TestDb, items: &[Item]) -> String {
    let store = db.open().expect("store opens");
    let mut stored =
        StoredSession::open(store, "big", Session::new(Default::default())).expect("session opens");
    stored
        .append(Format::Events, items.to_vec())
        .expect("bulk append");
    stored.compile().expect("compile and snapshot");
    assert_eq!(stored.snapshot_seq(), items.len() as u64);
    items.last().map(|i| i.id.clone()).unwrap_or_default()
}

fn resume(c: &mut Criterion) {
    let text = ctxgc_core::synth::events_jsonl(SESSION_EVENTS, 42);
    let items = lower_events(&text, &Default::default()).expect("generated trace is valid");
    let mut group = c.benchmark_group("resume_100k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("full_compile", |b| {
        b.iter_with_large_drop(|| {
            let items = lower_events(&text, &Default::default()).expect("valid");
            let mut session = Session::new(Default::default());
            session.extend(items).expect("valid");
            session.compile();
            session
        })
    });
    group.bench_function("full_render", |b| {
        b.iter_with_large_drop(|| {
            let items = lower_events(&text, &Default::default()).expect("valid");
            let mut session = Session::new(Default::default());
            session.extend(items).expect("valid");
            session.compile();
            let size = black_box(prompt::render(&session).text.len());
            (session, size)
        })
    });
    group.bench_function("full_report", |b| {
        b.iter_with_large_drop(|| {
            ctxgc_core::compile(&text, &Options::default()).expect("compiles")
        })
    });
    for db in test_databases() {
        let last = stored_session(&db, &items);
        let next = Cell::new(0u64);
        let parent = std::cell::RefCell::new(last);
        let step = |upto: Upto| {
            let n = next.get();
            let store = db.open().expect("store opens");
            let mut stored = StoredSession::open(store, "big", Session::new(Default::default()))
                .expect("session opens");
            let item = event(n, Some(&parent.borrow()));
            stored.append(Format::Events, vec![item]).expect("append");
            stored.compile().expect("compile");
            let size = match upto {
                Upto::Compile => stored.len() as usize,
                Upto::Render => prompt::render(stored.session()).text.len(),
                Upto::Report => report_events(stored.session(), Default::default())
                    .output
                    .len(),
            };
            *parent.borrow_mut() = format!("x{n}");
            next.set(n + 1);
            (stored, size)
        };
        for (name, upto) in [
            ("compile", Upto::Compile),
            ("render", Upto::Render),
            ("report", Upto::Report),
        ] {
            group.bench_function(format!("{}_{name}", db.backend), |b| {
                b.iter_with_large_drop(|| step(upto))
            });
        }
        // A long-running instance keeps the session open: it catches up with what others
        // appended, appends, and compiles what is new.
        let mut warm = StoredSession::open(
            db.open().expect("store opens"),
            "big",
            Session::new(Default::default()),
        )
        .expect("session opens");
        group.bench_function(format!("{}_warm_compile", db.backend), |b| {
            b.iter_batched(
                || {
                    let n = next.get();
                    next.set(n + 1);
                    let item = event(n, Some(&parent.borrow()));
                    *parent.borrow_mut() = format!("x{n}");
                    item
                },
                |item| {
                    warm.refresh().expect("refresh");
                    warm.append(Format::Events, vec![item]).expect("append");
                    warm.compile().expect("compile");
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, append, resume);
criterion_main!(benches);
