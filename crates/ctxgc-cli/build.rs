//! Links the `ctxgc` executable as a position-dependent (non-PIE) binary on Linux.
//!
//! A compile is often a whole process per request (an agent loop shelling out to
//! `ctxgc compile`), so start-up is part of every figure a user pays. As a PIE, the loader must
//! apply ~40,000 relative relocations to `.data.rel.ro` before `main`, which writes (and so
//! copies) about 160 pages; on the 2-core virtual machines measured, those copy-on-write faults
//! were most of the process's system time (about 2 of its 3.3 ms of CPU for `ctxgc --version`).
//! Linked at a fixed address the same pages are read straight from the page cache, and only
//! when used.
//!
//! The price is that the executable's own code is not placed at a random address (shared
//! libraries, stack and heap still are). Set `CTXGC_BUILD_PIE=1` when building to keep PIE,
//! for a long-running `ctxgc gateway` where that hardening matters more than start-up.

fn main() {
    println!("cargo:rerun-if-env-changed=CTXGC_BUILD_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let keep_pie = std::env::var("CTXGC_BUILD_PIE").is_ok_and(|v| v == "1");
    if linux && !keep_pie {
        println!("cargo:rustc-link-arg-bin=ctxgc=-no-pie");
    }
}
