//! The TraceGC fixtures appended to a live session one event at a time, compiling after
//! every event, end exactly where compiling the whole trace at once ends: same decisions,
//! same prompt. Out-of-order edges (`edge_injection` closing a cycle) arrive last, after
//! several compiles of an in-order graph. A whole fixture appended at once and compiled in
//! cache-stable mode (which takes items one at a time over an already linked graph) does not
//! panic and ends with the same eager decisions.

use std::path::PathBuf;

use ctxgc_core::frontend::events::lower_events;
use ctxgc_core::render::prompt;
use ctxgc_core::session::CacheModel;
use ctxgc_core::{Options, Session, compile};

fn fixtures() -> Vec<(String, String)> {
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
            let text = std::fs::read_to_string(&p).expect("fixture reads");
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn one_event_at_a_time_ends_like_the_whole_trace() {
    for (name, text) in fixtures() {
        let whole = compile(&text, &Options::default()).expect("fixture compiles");
        let items = lower_events(&text, &Default::default()).expect("fixture lowers");
        let mut session = Session::new(Default::default());
        for item in items {
            let id = item.id.clone();
            session
                .append(item)
                .unwrap_or_else(|e| panic!("{name} {id}: {e}"));
            session.compile();
            // Rendering after every step exercises the render order of a growing graph.
            prompt::render(&session);
        }
        assert_eq!(session.decisions(), whole.decisions, "{name}");
        assert_eq!(prompt::render(&session).text, whole.output, "{name}");
    }
}

#[test]
fn a_whole_fixture_compiled_item_by_item_over_a_linked_graph() {
    for (name, text) in fixtures() {
        let whole = compile(&text, &Options::default()).expect("fixture compiles");
        let items = lower_events(&text, &Default::default()).expect("fixture lowers");
        let mut session = Session::new(Default::default());
        session.enable_cache_stable(CacheModel::default());
        session.extend(items).expect("fixture extends");
        session.compile();
        let eager: Vec<_> = (0..session.items().len())
            .map(|i| session.eager_plan_of(i).action())
            .collect();
        let expected: Vec<_> = whole.decisions.iter().map(|d| d.action).collect();
        assert_eq!(eager, expected, "{name}");
        assert_eq!(
            session.render_order(),
            {
                let mut plain = Session::new(Default::default());
                plain
                    .extend(lower_events(&text, &Default::default()).unwrap())
                    .unwrap();
                plain.compile();
                plain.render_order()
            },
            "{name}"
        );
    }
}
