//! The structured-event front-end: validates each event against its type's schema and
//! lowers it to an [`Item`]. Every problem in the trace is reported, not only the first.
//!
//! Common fields: `id` (non-empty string), `type`, `timestamp` (number; not required for
//! `edge_injection`), optional `parent_id`, and retention metadata `importance` (0–10 or
//! `low`/`normal`/`high`/`critical`), `tags` (strings), `retain_until` (a timestamp or an
//! event id). Decisions, requirements and constraints may name the notes they replace in
//! `supersedes` (an id or a list of ids).

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::error::{Diagnostic, Error};
use crate::formats::key::Format;
use crate::frontend::split::{Layout, RawItem};
use crate::frontend::{detect, detect_and_split_unchecked};
use crate::ir::{
    Call, Item, Kind, NoteKind, RetainUntil, Retention, Run, RunKind, ToolOutput,
    write_canonical_entries,
};
use crate::unique_keys::Members;

pub use crate::compile::options::EventOptions;

/// Fields every event may carry, not part of any type's own schema.
const COMMON: [&str; 7] = [
    "id",
    "type",
    "timestamp",
    "parent_id",
    "importance",
    "tags",
    "retain_until",
];

/// Lowers a whole trace (JSON array, `{"events": [...]}` or JSONL).
///
/// ```
/// use ctxgc_core::frontend::events::lower_events;
/// let items = lower_events(r#"{"id":"e1","type":"file_read","timestamp":1,"path":"a.py"}"#, &Default::default()).unwrap();
/// assert_eq!(items[0].id, "e1");
/// let err = lower_events(r#"[{"id":"e1","type":"file_read","timestamp":1}]"#, &Default::default()).unwrap_err();
/// assert!(err.to_string().contains(r#"field "path""#));
/// ```
pub fn lower_events(text: &str, options: &EventOptions) -> Result<Vec<Item>, Error> {
    let (detected, raw, validated) = detect_and_split_unchecked(text)?;
    if detected.format != Format::Events {
        return Err(Error::UnknownFormat(format!(
            "expected structured events, found {}",
            detected.format.name()
        )));
    }
    lower_raw_events(&raw, options)
        .map_err(|e| crate::frontend::broken_document_first(text, validated, e))
}

/// Lowers events already split into their exact bytes. A large trace is lowered on every
/// core ([`crate::parallel`]); items and problems come out in trace order either way.
pub fn lower_raw_events(raw: &[RawItem<'_>], options: &EventOptions) -> Result<Vec<Item>, Error> {
    let bytes = raw.iter().map(|r| r.text.len()).sum();
    let lowered = crate::parallel::map_in_order(raw, bytes, |index, raw| {
        lower_raw_event(index, raw.text, options)
    });
    if lowered.iter().all(Result::is_ok) {
        return Ok(lowered.into_iter().filter_map(Result::ok).collect());
    }
    let problems = lowered
        .into_iter()
        .filter_map(Result::err)
        .flatten()
        .collect();
    Err(Error::Invalid(problems))
}

/// Parses and lowers the event at `index`, or lists everything wrong with it.
fn lower_raw_event(
    index: usize,
    text: &str,
    options: &EventOptions,
) -> Result<Item, Vec<Diagnostic>> {
    // An event is read member by member; only what that cannot read (not one object, broken
    // JSON, a repeated key) is parsed again as a whole, to say exactly what is wrong.
    if let Some(members) = crate::unique_keys::parse_members(text) {
        return lower_members(index, text, members, options);
    }
    match crate::unique_keys::parse_unique(text) {
        Ok((value, Some(repeated))) => {
            let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
            Err(vec![crate::chat::lowering::duplicate_key_problem(
                index, id, &repeated,
            )])
        }
        Ok((value, None)) => lower_event(index, text, value, options),
        Err(e) => Err(vec![Diagnostic::new(
            index,
            None,
            None,
            format!("malformed JSON: {e}"),
        )]),
    }
}

/// Reads fields of one event, collecting every problem.
struct Fields<'a> {
    index: usize,
    /// The event's id, for problems (copied only when there is one to report).
    id: Option<&'a str>,
    members: &'a [(Cow<'a, str>, Value)],
    problems: Vec<Diagnostic>,
    used: Vec<&'static str>,
}

/// The value of member `field`: an event has a handful of members, so a scan beats a hash.
fn member<'a>(members: &'a [(Cow<'_, str>, Value)], field: &str) -> Option<&'a Value> {
    members.iter().find(|(k, _)| k == field).map(|(_, v)| v)
}

use crate::chat::lowering::type_name;

impl<'a> Fields<'a> {
    fn problem(&mut self, field: &str, message: impl Into<String>) {
        self.problems.push(Diagnostic::new(
            self.index,
            self.id.map(str::to_owned),
            Some(field),
            message,
        ));
    }

    fn get(&mut self, field: &'static str) -> Option<&'a Value> {
        self.used.push(field);
        member(self.members, field)
    }

    fn required(&mut self, field: &'static str) -> Option<&'a Value> {
        let v = self.get(field);
        if v.is_none() {
            self.problem(field, "missing required field");
        }
        v
    }

    fn string(&mut self, field: &'static str) -> String {
        match self.required(field) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::String(_)) => {
                self.problem(field, "must be a non-empty string");
                String::new()
            }
            Some(other) => {
                let found = type_name(other);
                self.problem(field, format!("expected string, found {found}"));
                String::new()
            }
            None => String::new(),
        }
    }

    fn optional_string(&mut self, field: &'static str) -> Option<String> {
        match self.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            Some(Value::String(_)) => {
                self.problem(field, "must be a non-empty string or null");
                None
            }
            Some(other) => {
                let found = type_name(other);
                self.problem(field, format!("expected string or null, found {found}"));
                None
            }
        }
    }

    fn integer(&mut self, field: &'static str) -> i64 {
        match self.required(field) {
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64().unwrap_or_default(),
            Some(other) => {
                let found = match other {
                    Value::Number(_) => "a non-integer number",
                    v => type_name(v),
                };
                self.problem(field, format!("expected integer, found {found}"));
                0
            }
            None => 0,
        }
    }

    fn boolean(&mut self, field: &'static str) -> bool {
        match self.required(field) {
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                let found = type_name(other);
                self.problem(field, format!("expected boolean, found {found}"));
                false
            }
            None => false,
        }
    }

    fn string_list(
        &mut self,
        field: &'static str,
        allow_single: bool,
        required: bool,
    ) -> Vec<String> {
        let v = if required {
            self.required(field)
        } else {
            self.get(field)
        };
        match v {
            None | Some(Value::Null) if !required => Vec::new(),
            None => Vec::new(),
            Some(Value::String(s)) if allow_single && !s.trim().is_empty() => vec![s.clone()],
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (n, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) if !s.trim().is_empty() => out.push(s.clone()),
                        other => {
                            let found = match other {
                                Value::String(_) => "an empty string",
                                v => type_name(v),
                            };
                            self.problem(
                                field,
                                format!("item {n}: expected non-empty string, found {found}"),
                            );
                        }
                    }
                }
                out
            }
            Some(other) => {
                let found = type_name(other);
                self.problem(field, format!("expected list of strings, found {found}"));
                Vec::new()
            }
        }
    }
}

fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lowers one parsed event.
pub fn lower_event(
    index: usize,
    raw: &str,
    value: Value,
    options: &EventOptions,
) -> Result<Item, Vec<Diagnostic>> {
    let Value::Object(map) = value else {
        return Err(vec![Diagnostic::new(
            index,
            None,
            None,
            format!("expected an event object, found {}", type_name(&value)),
        )]);
    };
    let members = map.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect();
    lower_members(index, raw, members, options)
}

/// Lowers one event from its members, in document order.
fn lower_members(
    index: usize,
    raw: &str,
    mut members: Members<'_>,
    options: &EventOptions,
) -> Result<Item, Vec<Diagnostic>> {
    // Payload fields (possibly huge) are moved out rather than copied. Each is taken out as an
    // ordered map's `swap_remove` would (the last member fills its place): that order is the
    // order of the extra fields kept beside the item.
    let mut payloads: Vec<(&'static str, Value)> = ["value", "arguments", "result"]
        .into_iter()
        .filter_map(|name| {
            let at = members.iter().position(|(k, _)| k == name)?;
            Some((name, members.swap_remove(at).1))
        })
        .collect();
    let mut take_payload = |f: &mut Fields<'_>, name: &'static str| -> Value {
        match payloads.iter().position(|(n, _)| *n == name) {
            Some(pos) => payloads.swap_remove(pos).1,
            None => {
                f.problem(name, "missing required field");
                Value::Null
            }
        }
    };
    let map = members.as_slice();
    let mut f = Fields {
        index,
        id: None,
        members: map,
        problems: Vec::new(),
        // The common fields and the few of any one kind: one allocation per event.
        used: Vec::with_capacity(COMMON.len() + 8),
    };
    f.used.extend(COMMON);
    let id = match member(map, "id") {
        Some(Value::String(s)) if !s.is_empty() => {
            f.id = Some(s);
            s.clone()
        }
        Some(Value::String(_)) => {
            f.problem("id", "must be a non-empty string");
            String::new()
        }
        Some(other) => {
            let found = type_name(other);
            f.problem("id", format!("expected string, found {found}"));
            String::new()
        }
        None => {
            f.problem("id", "missing required field");
            String::new()
        }
    };
    let ty = match member(map, "type") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            let found = type_name(other);
            f.problem("type", format!("expected string, found {found}"));
            return Err(f.problems);
        }
        None => {
            f.problem("type", "missing required field");
            return Err(f.problems);
        }
    };
    let timestamp = match member(map, "timestamp") {
        Some(Value::Number(n)) => n.as_f64(),
        None if ty == "edge_injection" => None,
        None => {
            f.problem("timestamp", "missing required field");
            None
        }
        Some(other) => {
            let found = type_name(other);
            f.problem("timestamp", format!("expected number, found {found}"));
            None
        }
    };
    let parent = f.optional_string("parent_id");
    let retention = lower_retention(&mut f);
    let kind = match ty {
        "set_var" => {
            let key = f.string("key");
            let value = take_payload(&mut f, "value");
            Kind::SetVar { key, value }
        }
        "tool_call" => {
            let name = f.string("tool_name");
            let arguments = take_payload(&mut f, "arguments");
            Kind::ToolCall(Call {
                call_id: id.clone(),
                name,
                arguments,
            })
        }
        "tool_result" => {
            let call_id = f.string("call_id");
            let output = take_payload(&mut f, "result");
            let is_error = matches!(f.get("is_error"), Some(Value::Bool(true)));
            Kind::ToolResult(ToolOutput {
                call_id,
                output,
                is_error,
            })
        }
        "abandon" => Kind::Abandon {
            targets: f.string_list("ref_to", false, true),
        },
        "decision" | "requirement" | "constraint" => {
            let note = match ty {
                "decision" => NoteKind::Decision,
                "requirement" => NoteKind::Requirement,
                _ => NoteKind::Constraint,
            };
            Kind::Note {
                note,
                content: f.string("content"),
                supersedes: f.string_list("supersedes", true, false),
            }
        }
        "file_read" => Kind::FileRead {
            path: f.string("path"),
        },
        "file_edit" => Kind::FileEdit {
            path: f.string("path"),
            diff_hash: f.string("diff_hash"),
        },
        "command_run" => {
            let command = f.string("command");
            let exit = f.integer("exit_code");
            run(
                &mut f,
                RunKind::Command,
                format!("command:{}", normalize_ws(&command)),
                command,
                exit == 0,
                format!("exit {exit}"),
            )
        }
        "test_run" => {
            let names = f.string_list("test_names", false, true);
            let exit = f.integer("exit_code");
            let passed = f.integer("passed_count");
            let failed = f.integer("failed_count");
            let mut sorted = names.clone();
            sorted.sort();
            run(
                &mut f,
                RunKind::Test,
                format!("test:{}", sorted.join("\u{1f}")),
                format!("tests {}", names.join(", ")),
                exit == 0 && failed == 0,
                format!("{passed} passed, {failed} failed, exit {exit}"),
            )
        }
        "build_run" => {
            let exit = f.integer("exit_code");
            f.used.push("target");
            f.used.push("command");
            let target = member(map, "target")
                .or_else(|| member(map, "command"))
                .map(crate::ir::plain_value)
                .unwrap_or_default();
            run(
                &mut f,
                RunKind::Build,
                format!("build:{}", normalize_ws(&target)),
                format!("build {target}").trim_end().to_owned(),
                exit == 0,
                format!("exit {exit}"),
            )
        }
        "verification" => {
            let content = f.string("content");
            let passed = f.boolean("passed");
            run(
                &mut f,
                RunKind::Verification,
                format!("verification:{}", normalize_ws(&content)),
                content,
                passed,
                if passed {
                    "passed".into()
                } else {
                    "failed".into()
                },
            )
        }
        "git_diff" => Kind::GitDiff {
            diff_hash: f.string("diff_hash"),
            files_changed: f.string_list("files_changed", false, true),
        },
        "git_commit" => Kind::GitCommit {
            commit_hash: f.string("commit_hash"),
            message: f.string("message"),
        },
        "error" => Kind::Error {
            message: f.string("message"),
            related_to: f.optional_string("related_to"),
        },
        "artifact_created" => Kind::Artifact {
            artifact_type: f.string("artifact_type"),
            path: f.string("path"),
        },
        "edge_injection" => Kind::EdgeInjection {
            src: f.string("src"),
            dst: f.string("dst"),
        },
        other if options.allow_unknown_types => Kind::Opaque {
            type_name: other.to_owned(),
        },
        other => {
            f.problem("type", format!("unknown event type {other:?} (use --allow-unknown to keep such events as opaque items)"));
            Kind::Opaque {
                type_name: other.to_owned(),
            }
        }
    };
    let Fields { used, problems, .. } = f;
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut extra = members
        .into_iter()
        .filter(|(k, _)| !used.contains(&k.as_ref()))
        .map(|(k, v)| (k.into_owned(), v))
        .peekable();
    // Most events have no extra field: a map (and its hasher) is made only for one that has.
    let extra: Option<Map<String, Value>> =
        (extra.peek().is_some() || !payloads.is_empty()).then(|| {
            // Payload fields this type does not use are extra fields like any other.
            extra
                .chain(payloads.into_iter().map(|(k, v)| (k.to_owned(), v)))
                .collect()
        });
    Ok(Item {
        id,
        raw: raw.to_owned(),
        kind,
        parent,
        timestamp,
        retention,
        extra: extra.map(|extra| Box::new(Value::Object(extra))),
    })
}

/// Builds a run; its signature covers every field but the event's own metadata.
fn run(
    f: &mut Fields<'_>,
    run: RunKind,
    identity: String,
    subject: String,
    success: bool,
    outcome: String,
) -> Kind {
    // What was run is compared through its normalised identity, everything else exactly.
    let mut rest: Vec<(&str, &Value)> = f
        .members
        .iter()
        .map(|(k, v)| (k.as_ref(), v))
        .filter(|(k, _)| {
            !COMMON
                .iter()
                .chain(&["command", "test_names", "content", "target"])
                .any(|c| c == k)
        })
        .collect();
    let mut signature = format!("{identity}\u{1e}");
    write_canonical_entries(&mut rest, &mut signature);
    Kind::Run(Run {
        run,
        subject,
        success,
        outcome,
        identity,
        signature,
    })
}

fn lower_retention(f: &mut Fields<'_>) -> Retention {
    let importance = match member(f.members, "importance") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => {
            match s.to_ascii_lowercase().as_str() {
                "low" => Some(2.0),
                "normal" | "medium" => Some(5.0),
                "high" => Some(8.0),
                "critical" => Some(10.0),
                other => {
                    f.problem("importance", format!("unknown level {other:?} (use a number 0-10 or low/normal/high/critical)"));
                    None
                }
            }
        }
        Some(other) => {
            let found = type_name(other);
            f.problem(
                "importance",
                format!("expected number or level name, found {found}"),
            );
            None
        }
    };
    let tags = f.string_list("tags", false, false);
    let retain_until = match member(f.members, "retain_until") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64().map(RetainUntil::Timestamp),
        Some(Value::String(s)) if !s.is_empty() => Some(RetainUntil::Event(s.clone())),
        Some(other) => {
            let found = type_name(other);
            f.problem(
                "retain_until",
                format!("expected a timestamp or an event id, found {found}"),
            );
            None
        }
    };
    Retention {
        importance,
        tags,
        retain_until,
    }
}

/// The layout a trace's events were found in, for callers that split input themselves.
pub fn events_layout(text: &str) -> Result<Layout, Error> {
    let d = detect(text)?;
    if d.format == Format::Events {
        Ok(d.layout)
    } else {
        Err(Error::UnknownFormat(format!(
            "expected structured events, found {}",
            d.format.name()
        )))
    }
}

/// The event types the front-end knows; an item of one of them (or any typed item with an
/// `id`) is an event.
pub const EVENT_TYPES: [&str; 18] = [
    "set_var",
    "tool_call",
    "tool_result",
    "abandon",
    "decision",
    "file_read",
    "file_edit",
    "command_run",
    "test_run",
    "build_run",
    "git_diff",
    "git_commit",
    "error",
    "artifact_created",
    "requirement",
    "constraint",
    "verification",
    "edge_injection",
];

/// Structured agent event traces (set_var, tool_call, ...), rendered as prompt text.
#[derive(Debug, Clone, Copy)]
pub struct Events;

impl crate::formats::wire::WireFormat for Events {
    fn format(&self) -> crate::formats::key::Format {
        crate::formats::key::Format::Events
    }

    fn family(&self) -> crate::formats::wire::Family {
        crate::formats::wire::Family::Events
    }

    fn name(&self) -> &'static str {
        "events"
    }

    fn claims_item(&self, item: &Map<String, Value>) -> bool {
        item.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| EVENT_TYPES.contains(&t) || item.contains_key("id"))
    }

    /// `{"events": [...]}`, or one event on its own (an object with a `type`).
    fn claims_object(
        &self,
        object: &dyn crate::formats::shape::ObjectShape,
    ) -> Option<crate::formats::shape::ObjectClaim> {
        use crate::formats::shape::{Member, ObjectClaim};
        let layout = if object.member("events") == Some(Member::List) {
            Layout::Wrapped("events")
        } else if object.member("type").is_some() {
            Layout::Lines
        } else {
            return None;
        };
        Some(ObjectClaim {
            layout,
            by_first_item: false,
        })
    }

    fn lower<'a>(
        &self,
        text: &'a str,
        options: &crate::compile::options::Options,
    ) -> Result<Vec<crate::formats::wire::Lowered<'a>>, Error> {
        let items = lower_events(text, &options.events)?;
        Ok(vec![crate::formats::wire::Lowered::bare(
            crate::formats::key::Format::Events,
            text,
            items,
        )])
    }

    /// An event trace is lowered from the split items, not read again.
    fn lower_split<'a>(
        &self,
        text: &'a str,
        raw: &[RawItem<'_>],
        validated: bool,
        options: &crate::compile::options::Options,
    ) -> Option<Result<crate::formats::wire::Lowered<'a>, Error>> {
        Some(
            lower_raw_events(raw, &options.events)
                .map_err(|e| crate::frontend::broken_document_first(text, validated, e))
                .map(|items| {
                    crate::formats::wire::Lowered::bare(
                        crate::formats::key::Format::Events,
                        text,
                        items,
                    )
                }),
        )
    }

    fn session(&self, options: &crate::compile::options::Options) -> crate::session::Session {
        crate::compile::options::event_session_template(options)
    }

    fn report(
        &self,
        _lowered: &crate::formats::wire::Lowered<'_>,
        session: &crate::session::Session,
        options: &crate::compile::options::Options,
    ) -> Result<crate::compile::report::Compiled, Error> {
        Ok(crate::compile::report_events_with(
            session,
            options.tokenizer,
            options.counting,
            options.detail,
        ))
    }

    fn before_after(
        &self,
        _lowered: &crate::formats::wire::Lowered<'_>,
        session: &crate::session::Session,
        _options: &crate::compile::options::Options,
        _prefix: &str,
    ) -> Result<(String, String), Error> {
        Ok((
            crate::compile::uncompacted_events(session),
            crate::render::prompt::render(session).text,
        ))
    }
}
