//! The Python package, end to end: the wheel is built with maturin, installed where the
//! test interpreter imports it, checked to install with `pip install --no-index` into a
//! fresh venv with no packages, and the pytest suite in `tests/python/` runs against it
//! (the real `openai` and `anthropic` SDKs against a fake provider on loopback, SQLite and
//! PostgreSQL stores, the corpus).
//!
//! The interpreter is `$CTXGC_TEST_PYTHON` (a venv with maturin, pytest and the SDKs:
//! `scripts/python-venv.sh`). Without it the test is skipped with a note, except under CI
//! (`CI` or `CTXGC_REQUIRE_SERVICES` set), where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn python() -> Option<PathBuf> {
    match std::env::var_os("CTXGC_TEST_PYTHON").filter(|v| !v.is_empty()) {
        Some(python) => Some(PathBuf::from(python)),
        None if ctxgc_store::testing::services_required() => panic!(
            "CTXGC_TEST_PYTHON is not set: point it at a venv with maturin, pytest, openai and anthropic (scripts/python-venv.sh)"
        ),
        None => {
            eprintln!(
                "note: Python package test skipped: set CTXGC_TEST_PYTHON to a venv with maturin, pytest, openai and anthropic (scripts/python-venv.sh)"
            );
            None
        }
    }
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(what: &str, command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    if !output.status.success() {
        panic!(
            "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output
}

/// Builds the wheel (debug profile: the cheapest build) into `out` and returns its path.
fn build_wheel(python: &Path, out: &Path) -> PathBuf {
    // The workspace's own target directory: dependencies built for the tests are reused.
    // A nested cargo may wait for the outer one's lock, never for itself.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("../../target"));
    run(
        "maturin build",
        Command::new(python)
            .args([
                "-m",
                "maturin",
                "build",
                "--profile",
                "dev",
                "--interpreter",
            ])
            .arg(python)
            .arg("--out")
            .arg(out)
            .arg("--manifest-path")
            .arg(crate_dir().join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", target)
            // maturin asks for a manylinux check; a local test wheel needs none.
            .args(["--compatibility", "linux"])
            .current_dir(crate_dir()),
    );
    let wheels: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("wheel directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "one wheel expected, found {wheels:?}");
    let name = wheels[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with("ctxgc-"), "{name}");
    assert!(name.contains("-abi3-"), "an abi3 wheel expected: {name}");
    wheels[0].clone()
}

/// A venv with nothing in it installs the wheel offline, and the package works there.
fn check_fresh_venv(python: &Path, wheel: &Path, dir: &Path) {
    let venv = dir.join("fresh-venv");
    run(
        "python -m venv",
        Command::new(python).args(["-m", "venv"]).arg(&venv),
    );
    let venv_python = venv.join("bin/python");
    run(
        "pip install --no-index",
        Command::new(&venv_python)
            .args([
                "-m",
                "pip",
                "install",
                "--no-index",
                "--disable-pip-version-check",
                "-q",
            ])
            .arg(wheel),
    );
    let out = run(
        "the installed package",
        Command::new(&venv_python).args([
            "-c",
            "import ctxgc, json\n\
             r = ctxgc.compact_events([{'id': 'e1', 'type': 'set_var', 'timestamp': 1, 'key': 'x', 'value': 1},\n\
                                       {'id': 'e2', 'type': 'set_var', 'timestamp': 2, 'key': 'x', 'value': 2}])\n\
             import importlib.metadata as m\n\
             print(json.dumps({'pruned': r['pruned_ids'], 'requires': m.requires('ctxgc')}))",
        ]),
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the check prints JSON");
    assert_eq!(report["pruned"], serde_json::json!(["e1"]));
    // No dependencies of its own.
    assert!(
        report["requires"].is_null() || report["requires"] == serde_json::json!([]),
        "{report}"
    );
}

#[test]
fn python_package_builds_installs_and_passes_its_suite() {
    let Some(python) = python() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let wheel = build_wheel(&python, &tmp.path().join("wheel"));
    check_fresh_venv(&python, &wheel, tmp.path());

    // Installed beside the test venv's packages without touching them.
    let site = tmp.path().join("site");
    run(
        "pip install --target",
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--no-index",
                "--no-deps",
                "--disable-pip-version-check",
                "-q",
                "--target",
            ])
            .arg(&site)
            .arg(&wheel),
    );

    // A PostgreSQL schema of its own when the server answers (required under CI).
    let postgres = match ctxgc_store::testing::postgres() {
        Ok(db) => Some(db),
        Err(why) if ctxgc_store::testing::services_required() => {
            panic!("PostgreSQL is required under CI and does not answer: {why}")
        }
        Err(why) => {
            eprintln!("note: PostgreSQL half of the Python suite skipped ({why})");
            None
        }
    };
    let corpus = std::env::var_os("CTXGC_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("../../../shared/corpus"));
    let mut pytest = Command::new(&python);
    pytest
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--doctest-modules",
        ])
        .arg(crate_dir().join("tests/python"))
        .arg(site.join("ctxgc"))
        .env("PYTHONPATH", &site)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("CTXGC_EXAMPLES", crate_dir().join("../../examples"))
        .env("CTXGC_CORPUS", &corpus)
        .current_dir(tmp.path());
    if let Some(db) = &postgres {
        pytest.env("CTXGC_TEST_PG_URL", db.spec());
    }
    let output = pytest.output().expect("start pytest");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "pytest failed:\n{stdout}");
    // Nothing may be skipped silently: a skip under CI is a failure.
    if ctxgc_store::testing::services_required() {
        assert!(
            !stdout.contains("skipped"),
            "tests were skipped under CI:\n{stdout}"
        );
    }
}
