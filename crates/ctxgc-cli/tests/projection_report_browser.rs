//! The HTML report in a real browser: headless Chromium renders it with no console message
//! and takes a screenshot. Without `/usr/bin/chromium` (Debian package `chromium`) the test
//! prints a note and passes; CI installs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";

/// Renders `page` in headless Chromium; returns its console lines and whether the screenshot
/// was written.
fn render(page: &Path, screenshot: &Path) -> (Vec<String>, bool) {
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,2400",
        ])
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    // A browser that hangs must not hang the test run.
    let start = Instant::now();
    while child.try_wait().expect("chromium status").is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish rendering {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = reader.join().unwrap_or_default();
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_owned)
        .collect();
    let shot =
        std::fs::read(screenshot).is_ok_and(|png| png.len() > 1000 && png.starts_with(b"\x89PNG"));
    (console, shot)
}

#[test]
fn the_report_renders_in_chromium_without_console_errors() {
    if !Path::new(CHROMIUM).exists() {
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
    let (console, _) = render(&broken, &dir.path().join("broken.png"));
    assert!(
        console.iter().any(|l| l.contains("boom")),
        "the console is read: {console:?}"
    );

    let fixtures =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ctxgc-core/tests/fixtures/projection");
    let mut traces: Vec<String> = (1..=5)
        .map(|n| {
            fixtures
                .join(format!("billing-{n}.jsonl"))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    // With the corpus at hand, a real report (many tools, failures, misses).
    let corpus = std::env::var_os("CTXGC_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/corpus"
            ))
        })
        .join("tau2-bench-leaderboard.jsonl");
    if corpus.is_file() {
        traces = vec![corpus.to_string_lossy().into_owned()];
    }
    let page = dir.path().join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .arg("report")
        .args(&traces)
        .arg("-o")
        .arg(&page)
        .output()
        .expect("ctxgc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screenshot = dir.path().join("report.png");
    let (console, shot) = render(&page, &screenshot);
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(shot, "a screenshot was written");
    if let Some(keep) = std::env::var_os("CTXGC_REPORT_SCREENSHOT") {
        std::fs::copy(&screenshot, keep).expect("screenshot copied");
    }
}
