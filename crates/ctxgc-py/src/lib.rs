//! # ctxgc-py
//!
//! The `ctxgc` Python package's native module (`ctxgc._native`): the compiler of
//! `ctxgc-core` and the stores of `ctxgc-store`, with Python values in and out. The public
//! API is the `ctxgc` package (`python/ctxgc`), which re-exports what is here and adds the
//! client middleware in pure Python.
//!
//! Every compile runs with the GIL released, so other Python threads keep running. Errors
//! are the exceptions of `ctxgc._errors`, carrying the messages the `ctxgc` command prints.

use pyo3::prelude::*;

// The allocator the `ctxgc` binary uses. A compile allocates and frees many small pieces
// (items, blocks, counts); under the C library's allocator that was a fifth of a small
// compile's time. Python objects are still allocated by Python.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod chat;
mod convert;
mod errors;
mod events;
mod live_chat;
mod options;
mod projection;

/// The native half of the `ctxgc` package; import `ctxgc` instead.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(chat::compile_messages, m)?)?;
    m.add_function(wrap_pyfunction!(chat::compile, m)?)?;
    m.add_function(wrap_pyfunction!(chat::receipt, m)?)?;
    m.add_function(wrap_pyfunction!(events::compact_events, m)?)?;
    m.add_class::<events::TraceGc>()?;
    m.add_class::<live_chat::Chat>()?;
    m.add_function(wrap_pyfunction!(projection::learn, m)?)?;
    m.add_function(wrap_pyfunction!(projection::measure, m)?)?;
    m.add_function(wrap_pyfunction!(projection::report, m)?)?;
    m.add_function(wrap_pyfunction!(projection::trim, m)?)?;
    m.add_class::<projection::Projection>()?;
    m.add_class::<projection::AutoTrim>()?;
    Ok(())
}
