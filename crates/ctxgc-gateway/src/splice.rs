//! The rendered request kept per conversation, so a request costs what it adds.
//!
//! Under cache-stable compilation every item's plan is fixed between two compaction steps
//! (frozen for the items before the last step, decided on arrival for the later ones), and so
//! is the register (it shows the state as of the last step). So the rendered item list only
//! grows between steps: the gateway keeps it (the exact bytes it sent, joined) and appends the
//! rendering of the new items, instead of rendering the whole conversation again. A
//! compaction step renders it afresh once. The result is byte-identical to the compiler's own
//! renderer ([`ctxgc_core::chat::compile::render_session`]), which the session tests check
//! against stateless compiles.

use ctxgc_core::chat::message_of;
use ctxgc_core::ir::Role;
use ctxgc_core::render::messages::{item_json, register_message};
use ctxgc_core::{Action, Error, Format, Session};

use crate::request::Conversation;

/// A conversation's rendered item list as of some number of items.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// Compaction steps the session had when rendering began.
    steps: usize,
    /// Items rendered so far.
    items: usize,
    format: Format,
    /// The item that is the Anthropic top-level system prompt (item 0), if any.
    system_item: Option<usize>,
    /// Anthropic: the top-level `system` value as sent (the prompt, the register after it).
    system: Option<String>,
    /// OpenAI Chat / Responses: the register message, placed before the first item that is
    /// not a system message.
    register: Option<String>,
    register_placed: bool,
    /// The item list's messages, joined by commas, without the brackets.
    list: String,
    /// Receipts so far: items sent retired or rewritten.
    receipts: usize,
}

impl Rendered {
    /// Starts rendering `session` (a cache-stable one) as of its last compaction step, with
    /// the register that step gave; nothing rendered yet.
    pub fn start(
        format: Format,
        session: &Session,
        system_item: Option<usize>,
        register: Option<&str>,
    ) -> Result<Rendered, Error> {
        let mut rendered = Rendered {
            steps: session.compaction_steps().len(),
            items: 0,
            format,
            system_item,
            system: None,
            register: None,
            register_placed: register.is_none(),
            list: String::new(),
            receipts: 0,
        };
        if format.wire().system_key().is_some() {
            // As the compiler's renderer writes it (Anthropic: the prompt's own bytes, or its
            // blocks with the register as one more text block).
            rendered.system = format
                .wire()
                .render_system(session, system_item, register)?;
            rendered.register_placed = true;
        } else {
            rendered.register = register.map(|r| register_message(format, r).to_string());
        }
        Ok(rendered)
    }

    /// Bytes of text it keeps (the rendered list, the system prompt and register).
    pub fn text_bytes(&self) -> usize {
        self.list.len()
            + self.system.as_ref().map_or(0, String::len)
            + self.register.as_ref().map_or(0, String::len)
    }

    /// Whether what is kept still holds for `session`: no compaction step since, nothing
    /// taken away, the same system prompt.
    pub fn holds_for(&self, format: Format, session: &Session, system_item: Option<usize>) -> bool {
        self.format == format
            && self.system_item == system_item
            && self.steps == session.compaction_steps().len()
            && self.items <= session.items().len()
    }

    fn push(&mut self, json: &str) {
        if !self.list.is_empty() {
            self.list.push(',');
        }
        self.list.push_str(json);
    }

    /// Renders the items appended since the last call.
    pub fn extend(&mut self, session: &Session) -> Result<(), Error> {
        let items = session.items();
        for (i, item) in items.iter().enumerate().skip(self.items) {
            if session.plan_of(i).action() != Action::Keep {
                self.receipts += 1;
            }
            if Some(i) == self.system_item {
                continue;
            }
            if !self.register_placed && message_of(item).is_none_or(|m| m.role != Role::System) {
                if let Some(r) = self.register.take() {
                    self.push(&r);
                }
                self.register_placed = true;
            }
            if let Some(json) = item_json(self.format, session, i, false)? {
                self.push(&json);
            }
        }
        self.items = items.len();
        Ok(())
    }

    /// Items sent retired or rewritten.
    pub fn receipts(&self) -> usize {
        self.receipts
    }

    /// The request body: the client's entries in their order and exact bytes, the item list
    /// (and the Anthropic `system`) replaced by the rendered ones; with `recall`, the recall
    /// tool added to `tools`.
    pub fn body(&self, conv: &Conversation<'_>, recall: bool) -> String {
        let extra = self.system.as_ref().map_or(0, String::len)
            + self.register.as_ref().map_or(0, String::len);
        let size = conv
            .entries
            .iter()
            .filter(|(k, _)| k != conv.items_key)
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum::<usize>()
            + self.list.len()
            + extra
            + 512;
        let mut list = String::with_capacity(self.list.len() + extra + 3);
        list.push('[');
        list.push_str(&self.list);
        if !self.register_placed
            && let Some(r) = &self.register
        {
            if !self.list.is_empty() {
                list.push(',');
            }
            list.push_str(r);
        }
        list.push(']');
        let mut pairs: Vec<(&str, &str)> = Vec::with_capacity(conv.entries.len() + 1);
        if let Some(system_key) = self.format.wire().system_key() {
            let mut placed = false;
            for (k, v) in &conv.entries {
                if k == system_key {
                    if let Some(s) = &self.system {
                        pairs.push((k, s));
                    }
                    placed = true;
                } else if k == conv.items_key {
                    if !placed && let Some(s) = &self.system {
                        pairs.push((system_key, s));
                        placed = true;
                    }
                    pairs.push((k, &list));
                } else {
                    pairs.push((k, v.get()));
                }
            }
        } else {
            for (k, v) in &conv.entries {
                if k == conv.items_key {
                    pairs.push((k, &list));
                } else {
                    pairs.push((k, v.get()));
                }
            }
        }
        let mut out = String::with_capacity(size);
        crate::recall::write_object(self.format, &pairs, recall, &mut out);
        out
    }
}
