//! The tool-output report page over reports built from real runs.

use ctxgc_core::projection::measure::MeasureOptions;
use ctxgc_core::projection::report::Report;
use ctxgc_core::projection::trace::Run;
use ctxgc_report::projection::render_html;
use serde_json::json;

fn runs(tool: &str) -> Vec<Run> {
    (0..4)
        .map(|i| {
            let mut run = Run::new(format!("run{i}"));
            let output = format!(
                r#"{{"id": "ORD{i}7", "status": "shipped", "notes": "left at the depot gate {i}, rescheduled twice, then handed to a neighbour", "eta": "2024-06-0{}"}}"#,
                i + 1
            );
            run.push_call(tool, json!({"order": i}), output, None);
            run.push_message(format!("Order ORD{i}7 arrives on June {}, 2024.", i + 1), None);
            run
        })
        .collect()
}

#[test]
fn the_page_is_self_contained_escaped_and_deterministic() {
    let report = Report::build(
        "orders <prod>",
        &runs("track<&>"),
        &MeasureOptions::default(),
    );
    let page = render_html(&report);
    assert!(page.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    assert!(page.ends_with("</main></body></html>\n"));
    assert!(page.contains("<title>orders &lt;prod&gt; — tool-output report</title>"));
    assert!(page.contains("<code>track&lt;&amp;&gt;</code>"));
    assert!(
        !page.contains("track<&>"),
        "tool names are escaped everywhere"
    );
    assert!(!page.contains("<script"), "no script");
    assert!(
        !page.contains("src=") && !page.contains("<link"),
        "no external asset"
    );
    assert_eq!(
        page,
        render_html(&report.clone()),
        "byte-identical for identical input"
    );
}

#[test]
fn a_tool_the_automatic_mode_stopped_trimming_is_marked() {
    let mut report = Report::build("auto", &runs("get_order"), &MeasureOptions::default());
    report.mark_disabled("get_order", "the agent asked back 3 of 4 trimmed outputs");
    let page = render_html(&report);
    assert!(page.contains("<span class=\"chip drop\">not trimmed</span> the agent asked back 3 of 4 trimmed outputs"), "{page}");
}
