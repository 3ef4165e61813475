//! Entity schemas: which keys a session may declare, and a value contract per key.
//!
//! Two input forms are read:
//!
//! - ctxgc's own form: `{"keys": {KEY: CONTRACT, ...}, "additional_keys": bool,
//!   "immutable": [KEY, ...]}` where a contract holds any of `type` (a JSON type name or a
//!   list of them: `string`, `number`, `integer`, `boolean`, `array`, `object`, `null`),
//!   `enum` (the allowed values) and `pattern` (a regular expression that must match
//!   somewhere in a string value, as in JSON Schema; anchor it with `^...$`).
//!   `additional_keys` defaults to `true`.
//! - the entity-schema form of contextgc (`{"entities": {KEY: [extraction regex, ...]},
//!   "values": {KEY: value regex}, "__immutable__": [KEY, ...]}`): the keys are those of
//!   `entities` and `values`, no other key may be declared, and a value must be a string that
//!   the `values` regex matches as a whole, case-insensitively (`(?-i:...)` scopes case back
//!   in), as that tool applies it. The extraction regexes are not used: ctxgc never infers
//!   state from prose.
//!
//! A declaration that breaks its contract is flagged, rejected or only reported, by
//! [`SchemaPolicy`]; it is always reported.
//!
//! ```
//! use ctxgc_core::chat::Schema;
//! use serde_json::json;
//! let schema = Schema::from_json(r#"{"keys": {"cabin_class": {"type": "string", "enum": ["economy", "business"]}}, "additional_keys": false}"#).unwrap();
//! assert!(schema.check("cabin_class", &json!("economy")).is_empty());
//! assert_eq!(schema.check("cabin_class", &json!("first")), vec!["not one of the allowed values \"economy\", \"business\"".to_string()]);
//! assert_eq!(schema.check("seat", &json!("4A")), vec!["key is not in the schema".to_string()]);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Error;
use crate::ir::canonical_json;

/// What a schema violation does to the declaration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemaPolicy {
    /// Applied, flagged in the register, reported.
    #[default]
    Flag,
    /// Not applied, reported.
    Reject,
    /// Applied without a flag in the register; still reported.
    Off,
}

impl SchemaPolicy {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SchemaPolicy::Flag => "flag",
            SchemaPolicy::Reject => "reject",
            SchemaPolicy::Off => "off",
        }
    }

    /// Parses [`SchemaPolicy::name`].
    pub fn from_name(name: &str) -> Option<SchemaPolicy> {
        [SchemaPolicy::Flag, SchemaPolicy::Reject, SchemaPolicy::Off]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// A regular expression, kept as its source (so the schema can be stored) and compiled once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pattern {
    /// The source as written in the schema.
    pub source: String,
    /// True: must match the whole value, case-insensitively (entity-schema form).
    pub whole_value: bool,
    #[serde(skip)]
    compiled: OnceLock<Option<Regex>>,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.whole_value == other.whole_value
    }
}

impl Pattern {
    fn build(source: &str, whole_value: bool) -> Result<Regex, regex::Error> {
        if whole_value {
            Regex::new(&format!("^(?i:(?:{source}))$"))
        } else {
            Regex::new(source)
        }
    }

    fn new(source: &str, whole_value: bool) -> Result<Pattern, regex::Error> {
        let regex = Self::build(source, whole_value)?;
        let compiled = OnceLock::new();
        let _ = compiled.set(Some(regex));
        Ok(Pattern {
            source: source.to_owned(),
            whole_value,
            compiled,
        })
    }

    fn is_match(&self, text: &str) -> bool {
        // A stored schema was checked when it was read; a pattern that no longer compiles
        // matches nothing, which reports every value rather than accepting them silently.
        self.compiled
            .get_or_init(|| Self::build(&self.source, self.whole_value).ok())
            .as_ref()
            .is_some_and(|r| r.is_match(text))
    }
}

/// The contract of one key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    /// Allowed JSON types (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// Allowed values (compared as canonical JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<Value>>,
    /// A pattern string values must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
}

/// An entity schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    /// Contracts by (normalised) key.
    pub keys: BTreeMap<String, Contract>,
    /// Whether keys outside `keys` may be declared.
    pub additional_keys: bool,
    /// Keys whose first value can never change.
    pub immutable: BTreeSet<String>,
}

const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "array", "object", "null",
];

fn type_matches(ty: &str, value: &Value) -> bool {
    match ty {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value
            .as_number()
            .is_some_and(|n| n.is_i64() || n.is_u64() || is_integral(&n.to_string())),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => false,
    }
}

fn is_integral(text: &str) -> bool {
    // Numbers keep their source text (arbitrary precision): "3", "-12" and "4.0" are
    // integers, "1e3" is too, "2.5" is not.
    match text.parse::<f64>() {
        Ok(f) => f.is_finite() && f.fract() == 0.0,
        Err(_) => false,
    }
}

fn schema_error(message: impl Into<String>) -> Error {
    Error::Usage(format!("schema: {}", message.into()))
}

impl Schema {
    /// Reads a schema in either form (see the module doc).
    pub fn from_json(text: &str) -> Result<Schema, Error> {
        let value: Value = serde_json::from_str(text).map_err(|e| Error::json("schema", &e))?;
        let Value::Object(map) = &value else {
            return Err(schema_error("expected a JSON object"));
        };
        if map.contains_key("entities") || map.contains_key("values") {
            Self::from_entity_form(map)
        } else if map.contains_key("keys") {
            Self::from_own_form(map)
        } else {
            Err(schema_error(
                "expected `keys` (ctxgc form) or `entities`/`values` (entity-schema form)",
            ))
        }
    }

    fn key_list(
        map: &serde_json::Map<String, Value>,
        field: &str,
    ) -> Result<BTreeSet<String>, Error> {
        match map.get(field) {
            None => Ok(BTreeSet::new()),
            Some(Value::Array(list)) => list
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_str()
                        .map(crate::chat::state::normalize_key)
                        .ok_or_else(|| schema_error(format!("`{field}`[{i}]: expected a string")))
                })
                .collect(),
            Some(_) => Err(schema_error(format!("`{field}`: expected a list of keys"))),
        }
    }

    fn from_entity_form(map: &serde_json::Map<String, Value>) -> Result<Schema, Error> {
        let mut keys: BTreeMap<String, Contract> = BTreeMap::new();
        if let Some(entities) = map.get("entities") {
            let Value::Object(entities) = entities else {
                return Err(schema_error("`entities`: expected an object"));
            };
            for key in entities.keys() {
                keys.entry(crate::chat::state::normalize_key(key))
                    .or_default();
            }
        }
        if let Some(values) = map.get("values") {
            let Value::Object(values) = values else {
                return Err(schema_error("`values`: expected an object"));
            };
            for (key, pattern) in values {
                let Some(source) = pattern.as_str() else {
                    return Err(schema_error(format!(
                        "`values`.{key}: expected a regex string"
                    )));
                };
                let pattern = Pattern::new(source, true)
                    .map_err(|e| schema_error(format!("`values`.{key}: invalid regex: {e}")))?;
                let contract = keys
                    .entry(crate::chat::state::normalize_key(key))
                    .or_default();
                contract.types = vec!["string".into()];
                contract.pattern = Some(pattern);
            }
        }
        Ok(Schema {
            keys,
            additional_keys: false,
            immutable: Self::key_list(map, "__immutable__")?,
        })
    }

    fn from_own_form(map: &serde_json::Map<String, Value>) -> Result<Schema, Error> {
        for field in map.keys() {
            if !matches!(
                field.as_str(),
                "keys" | "additional_keys" | "immutable" | "_comment"
            ) {
                return Err(schema_error(format!("unknown field `{field}`")));
            }
        }
        let Some(Value::Object(entries)) = map.get("keys") else {
            return Err(schema_error("`keys`: expected an object of contracts"));
        };
        let mut keys = BTreeMap::new();
        for (key, contract) in entries {
            let Value::Object(c) = contract else {
                return Err(schema_error(format!("`keys`.{key}: expected an object")));
            };
            let mut out = Contract::default();
            for (field, v) in c {
                match field.as_str() {
                    "type" => {
                        let names: Vec<&Value> = match v {
                            Value::Array(list) => list.iter().collect(),
                            other => vec![other],
                        };
                        for name in names {
                            match name.as_str() {
                                Some(t) if TYPES.contains(&t) => out.types.push(t.to_owned()),
                                _ => {
                                    return Err(schema_error(format!(
                                        "`keys`.{key}.type: expected one of {}",
                                        TYPES.join(", ")
                                    )));
                                }
                            }
                        }
                    }
                    "enum" => match v {
                        Value::Array(list) if !list.is_empty() => out.allowed = Some(list.clone()),
                        _ => {
                            return Err(schema_error(format!(
                                "`keys`.{key}.enum: expected a non-empty list"
                            )));
                        }
                    },
                    "pattern" => {
                        let Some(source) = v.as_str() else {
                            return Err(schema_error(format!(
                                "`keys`.{key}.pattern: expected a regex string"
                            )));
                        };
                        out.pattern = Some(Pattern::new(source, false).map_err(|e| {
                            schema_error(format!("`keys`.{key}.pattern: invalid regex: {e}"))
                        })?);
                    }
                    "description" => {}
                    other => {
                        return Err(schema_error(format!(
                            "`keys`.{key}: unknown field `{other}`"
                        )));
                    }
                }
            }
            keys.insert(crate::chat::state::normalize_key(key), out);
        }
        let additional_keys = match map.get("additional_keys") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(schema_error("`additional_keys`: expected true or false")),
        };
        Ok(Schema {
            keys,
            additional_keys,
            immutable: Self::key_list(map, "immutable")?,
        })
    }

    /// Every way `value` breaks the contract of (normalised) `key`; empty when it keeps it.
    pub fn check(&self, key: &str, value: &Value) -> Vec<String> {
        let Some(contract) = self.keys.get(key) else {
            return if self.additional_keys {
                Vec::new()
            } else {
                vec!["key is not in the schema".to_owned()]
            };
        };
        let mut problems = Vec::new();
        if !contract.types.is_empty() && !contract.types.iter().any(|t| type_matches(t, value)) {
            problems.push(format!("expected {}", contract.types.join(" or ")));
        }
        if let Some(allowed) = &contract.allowed {
            let text = canonical_json(value);
            if !allowed.iter().any(|a| canonical_json(a) == text) {
                let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
                problems.push(format!("not one of the allowed values {}", list.join(", ")));
            }
        }
        if let Some(pattern) = &contract.pattern {
            match value.as_str() {
                Some(s) if pattern.is_match(s) => {}
                Some(_) => problems.push(format!("does not match /{}/", pattern.source)),
                None if contract.types.is_empty() => problems.push(format!(
                    "not a string, so it cannot match /{}/",
                    pattern.source
                )),
                None => {}
            }
        }
        problems
    }

    /// True when the key can never change once set.
    pub fn is_immutable(&self, key: &str) -> bool {
        self.immutable.contains(key)
    }
}
