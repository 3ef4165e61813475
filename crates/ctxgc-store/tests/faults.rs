//! Faults under a stream of appends: the PostgreSQL connection killed by the server (what a
//! restart does to a client: `pg_terminate_backend` from a second connection, which leaves
//! the shared server running for everyone else), SQLite on a full disk (a writer process
//! whose file-size limit is reached, `RLIMIT_FSIZE`), and SQLite in a read-only directory.
//! In every case a failed append says what failed, and what was acknowledged is stored
//! exactly once, in order, byte for byte.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ctxgc_core::store::{Store, content_hash};
use ctxgc_core::{Format, Item};
use ctxgc_store::Location;
use ctxgc_store::testing::{postgres, services_required};

/// The `n`th event of a chain (each names the previous as its parent).
fn event(n: u64) -> String {
    let parent = if n == 0 {
        String::new()
    } else {
        format!(r#","parent_id":"p{}""#, n - 1)
    };
    format!(
        r#"{{"id":"p{n}","type":"set_var","timestamp":{n}{parent},"key":"k{}","value":{n}}}"#,
        n % 7
    )
}

fn item(n: u64) -> Vec<Item> {
    common::items(&event(n))
}

/// A PostgreSQL test database reached under an application name of its own, so that a
/// second connection can find and kill exactly its backends.
fn postgres_with_name(name: &str) -> Option<(ctxgc_store::testing::TestDb, String)> {
    match postgres() {
        Ok(db) => {
            let Location::Postgres(url) = &db.location else {
                unreachable!("a PostgreSQL test database has a URL")
            };
            let url = format!("{url}&application_name={name}");
            Some((db, url))
        }
        Err(e) if services_required() => panic!("PostgreSQL is required: {e}"),
        Err(e) => {
            eprintln!("note: PostgreSQL not available ({e}); skipped");
            None
        }
    }
}

/// Kills every backend of `name` from a connection of its own; returns how many.
fn terminate(admin: &mut postgres::Client, name: &str) -> usize {
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()",
            &[&name],
        )
        .map(|rows| rows.len())
        .unwrap_or(0)
}

fn admin_client() -> postgres::Client {
    let url = std::env::var("CTXGC_TEST_PG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| ctxgc_store::testing::DEFAULT_TEST_PG.to_owned());
    postgres::Client::connect(&url, postgres::NoTls).expect("the admin connection")
}

/// Appends events `0..total` one per transaction, as a careful writer does: an append that
/// fails is not acknowledged; the writer then reads where the session stands (a commit whose
/// answer was lost shows as the sequence having moved on) and goes on from there. Returns
/// the errors seen.
fn append_all(
    store: &mut impl Store,
    context: &str,
    total: u64,
    progress: &AtomicUsize,
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut next = 0u64;
    while next < total {
        match store.append(context, Format::Events, next, &item(next)) {
            Ok(after) => {
                assert_eq!(after, next + 1);
                next = after;
                progress.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => {
                errors.push(e.to_string());
                assert!(errors.len() < 500, "the writer never recovers: {errors:?}");
                // Where does the session stand? A commit whose answer was lost shows here.
                let at = stands_at(store, context, &mut errors);
                assert!(
                    at == next || at == next + 1,
                    "the session moved to {at} while appending {next}"
                );
                next = at;
            }
        }
    }
    errors
}

/// Where the session stands (its item count), asked until the store has reconnected: after
/// the server ends the connection, the driver notices on the first or second request, and the
/// store reconnects on the next. Every failure on the way is recorded.
fn stands_at(store: &mut impl Store, context: &str, errors: &mut Vec<String>) -> u64 {
    for _ in 0..5 {
        match store.info(context) {
            Ok(info) => return info.map_or(0, |i| i.items),
            Err(e) => errors.push(e.to_string()),
        }
    }
    panic!("the store never reconnected: {errors:?}");
}

/// Every event `0..total` stored once, in order, byte for byte.
fn assert_exactly(store: &mut impl Store, context: &str, total: u64) {
    // A read right after a kill fails once or twice before the store reconnects.
    let stored = (0..5)
        .find_map(|_| store.items(context, 0).ok())
        .expect("items read back");
    assert_eq!(stored.len() as u64, total, "items lost or doubled");
    for (n, item) in stored.iter().enumerate() {
        assert_eq!(item.raw, event(n as u64), "sequence {n}");
    }
}

#[test]
fn postgres_connection_killed_between_appends_reconnects() {
    let name = format!("ctxgc_fault_a_{}", std::process::id());
    let Some((_db, url)) = postgres_with_name(&name) else {
        return;
    };
    let mut admin = admin_client();
    let mut store = ctxgc_store::open(&Location::Postgres(url)).expect("opens");
    let mut killed = 0;
    let mut errors = Vec::new();
    for round in 0..10u64 {
        killed += terminate(&mut admin, &name);
        // The next append after a kill reconnects, or fails clearly and the one after does.
        let mut next = round * 20;
        while next < (round + 1) * 20 {
            match store.append("ctx", Format::Events, next, &item(next)) {
                Ok(after) => next = after,
                Err(e) => {
                    let message = e.to_string();
                    assert!(message.contains("postgres"), "an unclear error: {message}");
                    errors.push(message);
                    assert!(errors.len() <= 30, "no reconnect: {errors:?}");
                    next = stands_at(&mut store, "ctx", &mut errors);
                }
            }
        }
    }
    assert!(
        killed >= 10,
        "the store's connection was killed {killed} times"
    );
    assert_exactly(&mut store, "ctx", 200);
    eprintln!(
        "{killed} kills, {} failed appends: {errors:?}",
        errors.len()
    );
}

#[test]
fn postgres_connection_killed_during_appends_loses_and_doubles_nothing() {
    let name = format!("ctxgc_fault_b_{}", std::process::id());
    let Some((_db, url)) = postgres_with_name(&name) else {
        return;
    };
    let total = 400;
    let done = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicUsize::new(0));
    let progress = Arc::new(AtomicUsize::new(0));
    // The killer strikes at varying moments, but only after the writer got a few appends
    // through since the last kill (a connection killed faster than it can be made would
    // test nothing but the killer).
    let killer = {
        let (done, kills, progress, name) =
            (done.clone(), kills.clone(), progress.clone(), name.clone());
        std::thread::spawn(move || {
            let mut admin = admin_client();
            let mut round = 0u64;
            while !done.load(Ordering::SeqCst) {
                let seen = progress.load(Ordering::SeqCst);
                while !done.load(Ordering::SeqCst) && progress.load(Ordering::SeqCst) < seen + 3 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                if done.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(300 * (round % 11)));
                kills.fetch_add(terminate(&mut admin, &name), Ordering::SeqCst);
                round += 1;
            }
        })
    };
    let mut store = ctxgc_store::open(&Location::Postgres(url.clone())).expect("opens");
    let errors = append_all(&mut store, "ctx", total, &progress);
    done.store(true, Ordering::SeqCst);
    killer.join().expect("the killer thread");
    for e in &errors {
        assert!(e.contains("postgres"), "an unclear error: {e}");
    }
    assert_exactly(&mut store, "ctx", total);
    eprintln!(
        "{} kills during {total} appends, {} failed appends, all recovered",
        kills.load(Ordering::SeqCst),
        errors.len()
    );
}

/// Runs `ctxgc-store-writer` under a shell that first applies `limits` (with the file-size
/// signal ignored, so that a write past the limit fails with EFBIG instead of killing).
fn writer(
    db: &Path,
    limits: &str,
    unprivileged: bool,
) -> (Vec<(u64, String, String)>, String, bool) {
    let script = format!("trap '' XFSZ; {limits} exec \"$0\" \"$@\"");
    let mut command = Command::new("sh");
    command
        .args(["-c", &script, env!("CARGO_BIN_EXE_ctxgc-store-writer")])
        .args(["--db"])
        .arg(db)
        .args(["--context", "ctx", "--count", "100000", "--prefix", "w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if unprivileged {
        command.uid(65534).gid(65534);
    }
    let output = command.output().expect("the writer runs");
    let acks = BufReader::new(&output.stdout[..])
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| {
            let mut p = l.split(' ');
            (p.next()? == "ack").then_some(())?;
            Some((
                p.next()?.parse().ok()?,
                p.next()?.to_owned(),
                p.next()?.to_owned(),
            ))
        })
        .collect();
    (
        acks,
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.success(),
    )
}

fn assert_stored_exactly(db: &Path, acks: &[(u64, String, String)]) {
    let mut store = ctxgc_store::open(&Location::Sqlite(db.to_path_buf())).expect("reopens");
    let stored = store.items("ctx", 0).expect("items read back");
    assert_eq!(
        stored.len(),
        acks.len(),
        "stored items beyond or short of the acknowledged ones"
    );
    for ((seq, id, hash), item) in acks.iter().zip(&stored) {
        assert_eq!(&item.id, id, "sequence {seq}");
        assert_eq!(&content_hash(item.raw.as_bytes()), hash, "sequence {seq}");
    }
}

#[test]
fn sqlite_on_a_full_disk_fails_clearly_and_keeps_what_it_acknowledged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("full.db");
    // 512-byte blocks: the database and its write-ahead log may not grow past 400 KB.
    let (acks, stderr, success) = writer(&db, "ulimit -f 800;", false);
    assert!(!success, "the writer never hit the limit");
    assert!(
        !acks.is_empty(),
        "nothing was acknowledged before the disk was full"
    );
    assert!(
        stderr.contains("full") || stderr.contains("large") || stderr.contains("I/O"),
        "an unclear error: {stderr}"
    );
    assert!(
        stderr.contains("sqlite"),
        "the error names the backend: {stderr}"
    );
    assert_stored_exactly(&db, &acks);
    // With room again, the session goes on where it stood.
    let mut store = ctxgc_store::open(&Location::Sqlite(db.clone())).expect("reopens");
    let next = acks.len() as u64;
    let raw =
        format!(r#"{{"id":"after","type":"set_var","timestamp":{next},"key":"x","value":1}}"#);
    store
        .append("ctx", Format::Events, next, &common::items(&raw))
        .expect("appends again");
    eprintln!(
        "{} items acknowledged before the disk was full: {}",
        acks.len(),
        stderr.trim()
    );
}

/// Root ignores directory permissions: the writer then runs as `nobody`.
fn running_as_root(dir: &Path) -> bool {
    std::fs::metadata(dir).is_ok_and(|m| m.uid() == 0)
}

fn read_only_dir(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).expect("chmod");
}

#[test]
fn sqlite_in_a_read_only_directory_fails_clearly_and_keeps_what_it_acknowledged() {
    let parent = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let root = running_as_root(parent.path());

    // A new database in a read-only directory: refused, naming the file.
    let empty = parent.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    read_only_dir(&empty);
    let db = empty.join("new.db");
    let (acks, stderr, success) = writer(&db, "", root);
    assert!(!success && acks.is_empty(), "{stderr}");
    assert!(
        stderr.contains("new.db"),
        "the error names the file: {stderr}"
    );

    // A database with acknowledged items whose directory turns read-only: appends fail
    // clearly or go on; either way nothing acknowledged is lost.
    let full = parent.path().join("full");
    std::fs::create_dir(&full).expect("mkdir");
    let db = full.join("ctxgc.db");
    {
        let mut store = ctxgc_store::open(&Location::Sqlite(db.clone())).expect("opens");
        for n in 0..5 {
            let raw = format!(
                r#"{{"id":"w{n}","type":"set_var","timestamp":{n},"key":"k","value":{n}}}"#
            );
            store
                .append("ctx", Format::Events, n, &common::items(&raw))
                .expect("appends");
        }
    }
    // Closed cleanly: the log and shared-memory files are gone, and cannot be made again.
    for entry in std::fs::read_dir(&full).expect("readable") {
        let path = entry.expect("entry").path();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    }
    read_only_dir(&full);
    let (acks, stderr, success) = writer(&db, "", root);
    assert!(!success, "appends into a read-only directory succeeded");
    assert!(
        acks.is_empty(),
        "acknowledged without a place to write: {acks:?}"
    );
    assert!(
        stderr.contains("ctxgc.db") || stderr.contains("read") || stderr.contains("open"),
        "an unclear error: {stderr}"
    );
    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut store = ctxgc_store::open(&Location::Sqlite(db.clone())).expect("reopens");
    let stored = store.items("ctx", 0).expect("items");
    assert_eq!(stored.len(), 5, "the acknowledged items are all there");
    eprintln!("read-only directory: {}", stderr.trim());
}
