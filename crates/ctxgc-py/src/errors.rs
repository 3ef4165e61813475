//! Rust errors as the Python exceptions of `ctxgc._errors`, carrying the messages the
//! `ctxgc` command prints.

use ctxgc_core::projection::ExpandError;
use ctxgc_core::store::StoreError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static INPUT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static USAGE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CONFLICT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static STORE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static EXPAND: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// An exception of class `name` of `ctxgc._errors` with `message`.
fn raise(cell: &'static PyOnceLock<Py<PyType>>, name: &str, message: String) -> PyErr {
    Python::attach(|py| match cell.import(py, "ctxgc._errors", name) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        // The package is always installed with its extension; if it is not importable the
        // import error says why.
        Err(import_error) => import_error,
    })
}

/// The input is invalid (the command's exit code 1).
pub fn input_error(message: String) -> PyErr {
    raise(&INPUT, "InputError", message)
}

/// A request that cannot be met (exit code 2).
pub fn usage_error(message: String) -> PyErr {
    raise(&USAGE, "UsageError", message)
}

/// A defect of ctxgc itself, never of the input.
pub fn internal_error(message: String) -> PyErr {
    raise(&ERROR, "Error", format!("internal error: {message}"))
}

/// Anything `expand` refuses.
pub fn expand_error(err: ExpandError) -> PyErr {
    raise(&EXPAND, "ExpandError", err.to_string())
}

/// A compiler error: usage errors keep their class, everything else is invalid input.
pub fn core_error(err: ctxgc_core::Error) -> PyErr {
    match err {
        ctxgc_core::Error::Usage(message) => usage_error(message),
        other => input_error(other.to_string()),
    }
}

/// A store error, by what the caller can do about it.
pub fn store_error(err: StoreError) -> PyErr {
    match err {
        StoreError::Conflict { .. } => raise(&CONFLICT, "ConflictError", err.to_string()),
        StoreError::Rejected { .. } => input_error(err.to_string()),
        StoreError::FormatMismatch { .. } => usage_error(err.to_string()),
        other => raise(&STORE, "StoreError", other.to_string()),
    }
}
