//! The console in a real browser: headless Chromium loads a bundled example, compiles it,
//! opens the first receipt, logs nothing on its console, and takes a screenshot. Without
//! `/usr/bin/chromium` (Debian package `chromium`) the test prints a note and passes, unless
//! `CTXGC_REQUIRE_SERVICES=1`, where that is a failure. `CTXGC_CONSOLE_SCREENSHOT=FILE` keeps
//! the screenshot.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, fill};
use ctxgc_console::{ConsoleOptions, StoreHandle};
use serde_json::Value;

const CHROMIUM: &str = "/usr/bin/chromium";

/// What one Chromium run gave: stdout (the DOM with `--dump-dom`) and its console lines.
struct Run {
    stdout: String,
    console: Vec<String>,
}

/// Runs Chromium on `url` with `extra` flags; the page's scripts and fetches get up to
/// 30 s of virtual time before the DOM is dumped or the screenshot taken.
fn chromium(url: &str, extra: &[String]) -> Run {
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--enable-logging=stderr",
            "--v=0",
            "--hide-scrollbars",
            "--window-size=1400,1000",
            "--virtual-time-budget=30000",
        ])
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    // A browser that hangs must not hang the test run.
    let start = Instant::now();
    while child.try_wait().expect("chromium status").is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish with {url}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = err.join().unwrap_or_default();
    Run {
        stdout: out.join().unwrap_or_default(),
        console: log
            .lines()
            .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
            .map(str::to_owned)
            .collect(),
    }
}

/// Text as Chromium writes it in a dumped DOM.
fn as_dom_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\u{a0}', "&nbsp;")
}

#[test]
fn the_console_compiles_an_example_and_opens_a_receipt_in_chromium() {
    if !Path::new(CHROMIUM).exists() {
        if std::env::var_os("CTXGC_REQUIRE_SERVICES").is_some_and(|v| v == "1") {
            panic!("{CHROMIUM} is required (CTXGC_REQUIRE_SERVICES=1): apt-get install chromium");
        }
        eprintln!(
            "note: {CHROMIUM} is absent (apt-get install chromium); skipping the browser test"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The check itself must see errors: a page that logs one is caught.
    let broken = dir.path().join("broken.html");
    std::fs::write(
        &broken,
        "<!DOCTYPE html><p>x</p><script>console.error('boom')</script>",
    )
    .unwrap();
    let run = chromium(
        &format!("file://{}", broken.display()),
        &["--dump-dom".into()],
    );
    assert!(
        run.console.iter().any(|l| l.contains("boom")),
        "the console is read: {:?}",
        run.console
    );

    let server = Server::start(ConsoleOptions::default(), None);
    let example = "support-session.json";
    // What the page should show: the API's own answer for the example.
    let view: Value = server.runtime.block_on(async {
        let text = reqwest::get(server.url(&format!("/api/examples/{example}")))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        reqwest::Client::new()
            .post(server.url("/api/compile?preset=default"))
            .body(text)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let first = &view["receipts"][0];
    let receipt_id = first["id"].as_str().expect("the example has receipts");
    let original = first["original"].as_str().expect("with its original");

    let page = server.url(&format!("/?example={example}&preset=default&receipt=first"));
    let run = chromium(&page, &["--dump-dom".into()]);
    assert!(
        run.console.is_empty(),
        "console messages: {:?}",
        run.console
    );
    let dom = run.stdout;
    assert!(
        dom.contains("data-ready=\"true\""),
        "the page started: {dom}"
    );
    assert!(
        dom.contains("data-compiled=\"true\""),
        "the example compiled"
    );
    assert!(
        dom.contains(&format!("data-receipt=\"{receipt_id}\"")),
        "the first receipt is open"
    );
    assert!(
        dom.contains("<aside id=\"detail\">"),
        "the detail panel is shown"
    );
    // The receipt's exact bytes and the pass's documentation are on the page.
    assert!(
        dom.contains(&as_dom_text(original)),
        "the original is shown"
    );
    let reason = first["reason"].as_str().unwrap();
    assert!(dom.contains(&format!("[{reason}]")));
    // Every item is listed, the retired and rewritten ones marked with their reason code.
    let items = view["items"].as_array().unwrap();
    assert_eq!(dom.matches("<li class=\"item ").count(), items.len());
    for item in items.iter().filter(|i| i["action"] != "keep") {
        let badge = format!(
            "{} · {}",
            item["action"].as_str().unwrap(),
            item["reason"].as_str().unwrap()
        );
        assert!(dom.contains(&badge), "{badge}");
    }

    let screenshot = dir.path().join("console.png");
    let run = chromium(&page, &[format!("--screenshot={}", screenshot.display())]);
    assert!(
        run.console.is_empty(),
        "console messages: {:?}",
        run.console
    );
    let png = std::fs::read(&screenshot).expect("a screenshot was written");
    assert!(png.len() > 10_000 && png.starts_with(b"\x89PNG"));
    if let Some(keep) = std::env::var_os("CTXGC_CONSOLE_SCREENSHOT") {
        std::fs::copy(&screenshot, keep).expect("screenshot copied");
    }
}

#[test]
fn a_stored_session_and_its_receipt_from_the_store_in_chromium() {
    if !Path::new(CHROMIUM).exists() {
        if std::env::var_os("CTXGC_REQUIRE_SERVICES").is_some_and(|v| v == "1") {
            panic!("{CHROMIUM} is required (CTXGC_REQUIRE_SERVICES=1): apt-get install chromium");
        }
        eprintln!(
            "note: {CHROMIUM} is absent (apt-get install chromium); skipping the browser test"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let location = ctxgc_store::Location::Sqlite(dir.path().join("ctxgc.db"));
    let mut store = ctxgc_store::open(&location).unwrap();
    fill(&mut store);
    let server = Server::start(
        ConsoleOptions::default(),
        Some(StoreHandle::new(store, &location)),
    );
    let answer: Value = server.runtime.block_on(async {
        reqwest::get(server.url("/api/sessions/coding"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let first = &answer["compiled"]["receipts"][0];
    let receipt_id = first["id"].as_str().expect("the session has receipts");
    let original = first["original"].as_str().unwrap();

    let run = chromium(
        &server.url("/?session=coding&receipt=first"),
        &["--dump-dom".into()],
    );
    assert!(
        run.console.is_empty(),
        "console messages: {:?}",
        run.console
    );
    let dom = run.stdout;
    assert!(
        dom.contains("data-ready=\"true\""),
        "the page started: {dom}"
    );
    assert!(
        dom.contains("data-session=\"coding\""),
        "the session is shown"
    );
    assert!(dom.contains(&format!("data-receipt=\"{receipt_id}\"")));
    // The session list names both stored sessions; the receipt's bytes come from the store.
    assert!(dom.contains(">coding</button>") && dom.contains(">support</button>"));
    assert!(
        dom.contains(&as_dom_text(original)),
        "the stored original is shown"
    );
}

#[test]
fn a_stored_chat_shows_its_growth_and_compaction_steps_in_chromium() {
    if !Path::new(CHROMIUM).exists() {
        if std::env::var_os("CTXGC_REQUIRE_SERVICES").is_some_and(|v| v == "1") {
            panic!("{CHROMIUM} is required (CTXGC_REQUIRE_SERVICES=1): apt-get install chromium");
        }
        eprintln!(
            "note: {CHROMIUM} is absent (apt-get install chromium); skipping the browser test"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let location = ctxgc_store::Location::Sqlite(dir.path().join("ctxgc.db"));
    let mut store = ctxgc_store::open(&location).unwrap();
    fill(&mut store);
    let server = Server::start(
        ConsoleOptions::default(),
        Some(StoreHandle::new(store, &location)),
    );
    let steps: Value = server.runtime.block_on(async {
        reqwest::get(server.url("/api/sessions/support/steps"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let run = chromium(&server.url("/?session=support"), &["--dump-dom".into()]);
    assert!(
        run.console.is_empty(),
        "console messages: {:?}",
        run.console
    );
    let dom = run.stdout;
    assert!(dom.contains("data-session=\"support\""), "{dom}");
    assert!(
        dom.contains("Growth and compaction steps (cache-stable)"),
        "{dom}"
    );
    let summary = format!(
        "{} messages: {} tokens stored, {} compiled cache-stable",
        steps["session"]["messages"],
        steps["session"]["tokens_before"],
        steps["session"]["tokens_after"]
    );
    assert!(dom.contains(&summary), "{summary} in {dom}");
}

#[test]
fn a_sessions_savings_and_the_totals_in_chromium() {
    use ctxgc_core::store::Store;
    use ctxgc_core::store::savings::{ProviderUsage, SavingsRecord, SavingsSource};

    if !Path::new(CHROMIUM).exists() {
        if std::env::var_os("CTXGC_REQUIRE_SERVICES").is_some_and(|v| v == "1") {
            panic!("{CHROMIUM} is required (CTXGC_REQUIRE_SERVICES=1): apt-get install chromium");
        }
        eprintln!(
            "note: {CHROMIUM} is absent (apt-get install chromium); skipping the browser test"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let location = ctxgc_store::Location::Sqlite(dir.path().join("ctxgc.db"));
    let mut store = ctxgc_store::open(&location).unwrap();
    fill(&mut store);
    // Two gateway requests of the stored chat and one trimmed proxy call, whose originals
    // session holds a receipt and nothing to compile.
    for (ordinal, before, after) in [(3, 9_100, 4_400), (5, 12_750, 5_020)] {
        store
            .record_savings(&SavingsRecord {
                source: SavingsSource::Gateway,
                context_id: "support".into(),
                ordinal,
                tool: "/v1/chat/completions".into(),
                tokens_before: before,
                tokens_after: after,
                usage: Some(ProviderUsage {
                    input_tokens: after,
                    cache_read_tokens: after / 2,
                    cache_write_tokens: 0,
                    output_tokens: 31,
                }),
                at_ms: 1_767_225_600_000 + ordinal,
            })
            .unwrap();
    }
    store
        .put_receipt("ctxgc-proxy", "abcdefghij", b"{\"flights\": []}")
        .unwrap();
    store
        .record_savings(&SavingsRecord {
            source: SavingsSource::Proxy,
            context_id: "ctxgc-proxy".into(),
            ordinal: 2,
            tool: "search_flights".into(),
            tokens_before: 5_210,
            tokens_after: 1_133,
            usage: None,
            at_ms: 1_767_225_600_100,
        })
        .unwrap();
    let server = Server::start(
        ConsoleOptions::default(),
        Some(StoreHandle::new(store, &location)),
    );

    let run = chromium(&server.url("/?session=support"), &["--dump-dom".into()]);
    assert!(
        run.console.is_empty(),
        "console messages: {:?}",
        run.console
    );
    let dom = run.stdout;
    assert!(dom.contains("data-ready=\"true\""), "{dom}");
    assert!(
        dom.contains("Saved by the gateway and the proxy (all sessions)"),
        "{dom}"
    );
    // Totals: gateway 21850 -> 9420 (12430 saved), proxy 5210 -> 1133 (4077 saved).
    assert!(
        dom.contains("<td>gateway</td><td>2</td><td>21850</td><td>9420</td><td>12430</td>"),
        "{dom}"
    );
    assert!(
        dom.contains("<td>proxy</td><td>1</td><td>5210</td><td>1133</td><td>4077</td><td>0</td>"),
        "{dom}"
    );
    // The session's own records, oldest first, with the provider's usage.
    assert!(dom.contains("Saved in support"), "{dom}");
    assert!(
        dom.contains("<td>gateway</td><td>5</td><td>/v1/chat/completions</td><td>12750</td><td>5020</td><td>7730</td><td>5020</td><td>2510</td><td>0</td><td>31</td>"),
        "{dom}"
    );
    // The session list shows what each session saved.
    assert!(dom.contains(">ctxgc-proxy</button>"), "{dom}");

    // The proxy's session: its savings, and no compile error for a session of receipts.
    let run = chromium(&server.url("/?session=ctxgc-proxy"), &["--dump-dom".into()]);
    assert!(
        run.console.is_empty(),
        "console messages: {:?}",
        run.console
    );
    let dom = run.stdout;
    assert!(dom.contains("data-ready=\"true\""), "{dom}");
    assert!(dom.contains("Saved in ctxgc-proxy"), "{dom}");
    assert!(
        dom.contains("<td>proxy</td><td>2</td><td>search_flights</td><td>5210</td><td>1133</td><td>4077</td><td>-</td>"),
        "{dom}"
    );
    assert!(!dom.contains("class=\"error\""), "{dom}");
}
