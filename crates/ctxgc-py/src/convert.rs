//! Python values to JSON text and JSON text to Python values.
//!
//! The compiler reads JSON text and keeps every item's original bytes, so Python values are
//! written straight to JSON text (no intermediate tree). A value JSON cannot hold is an
//! error that names where it sits (`messages[3]["content"]`), never a silent conversion:
//! `NaN`, non-string keys, sets, arbitrary objects. Pydantic models (what the OpenAI and
//! Anthropic SDKs return, often appended to the history as they are) are written as their
//! `model_dump(mode="json", exclude_unset=True)`, which is how the SDKs send them.

use std::fmt::Write as _;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

use crate::errors;

/// Deeper nesting than this is refused (a cycle, or input built to exhaust the stack).
const MAX_DEPTH: usize = 256;

/// One step of the path to a value, for messages.
enum Step {
    Index(usize),
    Key(String),
}

/// Writes `value` as compact JSON text; `root` names it in errors (`"messages"`).
pub fn to_json_text(value: &Bound<'_, PyAny>, root: &str) -> PyResult<String> {
    let mut writer = Writer {
        out: String::new(),
        path: Vec::new(),
        root,
    };
    writer.write(value)?;
    Ok(writer.out)
}

struct Writer<'r> {
    out: String,
    path: Vec<Step>,
    root: &'r str,
}

impl Writer<'_> {
    fn location(&self) -> String {
        let mut s = self.root.to_owned();
        for step in &self.path {
            match step {
                Step::Index(i) => {
                    let _ = write!(s, "[{i}]");
                }
                Step::Key(k) => {
                    let _ = write!(s, "[{k:?}]");
                }
            }
        }
        s
    }

    fn fail(&self, problem: impl std::fmt::Display) -> PyErr {
        errors::input_error(format!("{}: {problem}", self.location()))
    }

    fn write_str(&mut self, s: &str) {
        // Serialising a str cannot fail.
        self.out
            .push_str(&serde_json::to_string(s).unwrap_or_default());
    }

    fn write(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if self.path.len() > MAX_DEPTH {
            return Err(self.fail(format_args!(
                "nested more than {MAX_DEPTH} levels deep (a value that contains itself?)"
            )));
        }
        if value.is_none() {
            self.out.push_str("null");
        } else if let Ok(s) = value.cast::<PyString>() {
            let text = s
                .to_str()
                .map_err(|_| self.fail("text is not valid Unicode (a lone surrogate)"))?;
            self.write_str(text);
        } else if value.is_instance_of::<PyBool>() {
            self.out
                .push_str(if value.is_truthy()? { "true" } else { "false" });
        } else if value.is_instance_of::<PyInt>() {
            match value.extract::<i64>() {
                Ok(n) => {
                    let _ = write!(self.out, "{n}");
                }
                // Larger integers keep every digit (the compiler reads numbers exactly).
                Err(_) => self.out.push_str(&value.str()?.to_cow()?),
            }
        } else if let Ok(f) = value.cast::<PyFloat>() {
            let x = f.value();
            if !x.is_finite() {
                return Err(self.fail(format_args!("{x} is not a JSON number")));
            }
            self.out
                .push_str(&serde_json::to_string(&x).unwrap_or_default());
        } else if let Ok(dict) = value.cast::<PyDict>() {
            self.out.push('{');
            for (n, (k, v)) in dict.iter().enumerate() {
                let key = match k.cast::<PyString>() {
                    Ok(k) => k
                        .to_str()
                        .map_err(|_| self.fail("a key is not valid Unicode"))?
                        .to_owned(),
                    Err(_) => {
                        return Err(self.fail(format_args!(
                            "keys must be strings, found {} key {}",
                            type_name(&k),
                            k.repr()?.to_cow()?
                        )));
                    }
                };
                if n > 0 {
                    self.out.push(',');
                }
                self.write_str(&key);
                self.out.push(':');
                self.path.push(Step::Key(key));
                self.write(&v)?;
                self.path.pop();
            }
            self.out.push('}');
        } else if let Ok(list) = value.cast::<PyList>() {
            self.write_items(list.iter())?;
        } else if let Ok(tuple) = value.cast::<PyTuple>() {
            self.write_items(tuple.iter())?;
        } else if value.hasattr("model_dump")? {
            let kwargs = PyDict::new(value.py());
            kwargs.set_item("mode", "json")?;
            kwargs.set_item("exclude_unset", true)?;
            let dumped = value
                .call_method("model_dump", (), Some(&kwargs))
                .map_err(|e| self.fail(format_args!("model_dump() failed: {e}")))?;
            if dumped.hasattr("model_dump")? {
                return Err(self.fail("model_dump() returned another model"));
            }
            self.write(&dumped)?;
        } else {
            return Err(self.fail(format_args!(
                "{} is not a JSON value (use dict, list, str, int, float, bool or None)",
                type_name(value)
            )));
        }
        Ok(())
    }

    fn write_items<'py>(&mut self, items: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<()> {
        self.out.push('[');
        for (i, item) in items.enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.path.push(Step::Index(i));
            self.write(&item)?;
            self.path.pop();
        }
        self.out.push(']');
        Ok(())
    }
}

/// The name of a value's type, for messages.
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_owned())
}

/// Parses JSON text the compiler wrote and builds the Python value.
pub fn from_json_text<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        errors::internal_error(format!("the compiler wrote JSON that does not parse: {e}"))
    })?;
    to_python(py, &value)
}

/// Builds the Python value of a JSON value: objects keep their key order, integers of any
/// size stay integers.
pub fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                let text = n.to_string();
                if text.contains(['.', 'e', 'E']) {
                    PyFloat::new(py, text.parse::<f64>().unwrap_or(f64::NAN)).into_any()
                } else {
                    py.get_type::<PyInt>().call1((text,))?
                }
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_python(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Serialises a Rust value to a Python value through JSON.
pub fn serialize<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(value)
        .map_err(|e| errors::internal_error(format!("cannot serialise a report: {e}")))?;
    to_python(py, &value)
}

/// A `TypeError` for an argument of the wrong type.
pub fn wrong_type(name: &str, expected: &str, found: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "{name}: expected {expected}, found {}",
        type_name(found)
    ))
}
