//! Wire formats: one module per format, each implementing [`WireFormat`], all listed once in
//! [`REGISTRY`].
//!
//! A format knows everything that depends on its shape: which items are its own (detection),
//! how a document lowers to the Session IR, which session compiles it, how a compiled session
//! is written back (rewrites included) and reported, how an output is validated, and where a
//! request body keeps its conversation (system prompt, messages, other fields) for a gateway.
//! The driver in [`crate::compile`] only ever talks to the trait: detect → format → lower →
//! [`Session`] → plan → render.
//!
//! A new format is one module here implementing [`WireFormat`] and one line in the registry
//! (which makes its [`Format`] variant and its place in [`REGISTRY`]). Code outside this folder never branches on a
//! format: it asks the codec, so detection ([`detect`]), the gateway's protocol
//! ([`protocol`]) and every report pick a new format up from the registry.
//!
//! ```
//! use ctxgc_core::Format;
//! use ctxgc_core::formats::REGISTRY;
//! let names: Vec<&str> = REGISTRY.iter().map(|f| f.name()).collect();
//! assert_eq!(names, ["responses", "anthropic", "openai-chat", "events", "tracetrim"]);
//! assert_eq!(Format::Anthropic.wire().items_key(), "messages");
//! assert_eq!(Format::Responses.wire().items_key(), "input");
//! ```

use serde_json::{Map, Value};

pub use wire::{Family, Lowered, WireFormat};

/// The driver half of [`WireFormat`] for a message-list format: chats lower, compile, report
/// and diff alike (`crate::chat::compile`), whichever of them they are.
macro_rules! chat_driver {
    () => {
        fn lower<'a>(
            &self,
            text: &'a str,
            options: &crate::compile::Options,
        ) -> Result<Vec<crate::formats::Lowered<'a>>, crate::error::Error> {
            crate::chat::compile::lower(text, options)
        }

        fn session(&self, options: &crate::compile::Options) -> crate::session::Session {
            crate::chat::compile::session_template(options)
        }

        fn report(
            &self,
            lowered: &crate::formats::Lowered<'_>,
            session: &crate::session::Session,
            options: &crate::compile::Options,
        ) -> Result<crate::compile::Compiled, crate::error::Error> {
            crate::chat::compile::report(lowered, session, options)
        }

        fn before_after(
            &self,
            lowered: &crate::formats::Lowered<'_>,
            session: &crate::session::Session,
            options: &crate::compile::Options,
            prefix: &str,
        ) -> Result<(String, String), crate::error::Error> {
            crate::chat::compile::transcripts(lowered, session, options, prefix)
        }

        fn family(&self) -> crate::formats::Family {
            crate::formats::Family::Chat
        }
    };
}

pub mod anthropic;
pub mod detect;
pub mod events;
pub mod openai_chat;
pub mod protocol;
pub mod records;
pub mod responses;
pub(crate) mod shape;
pub mod tracetrim;
pub(crate) mod wire;

/// The one place a format is registered: its key (a variant of [`Format`], whose kebab-case
/// spelling is its stored name), its module and its codec. The order is the order detection
/// asks formats whether an item is theirs (the first to claim it wins).
///
/// The list is handed to a macro, so that one list makes both the key type (in `key.rs`,
/// which depends on no code: the lowest layers name formats by it) and, here, [`REGISTRY`]
/// and [`Format::wire`].
macro_rules! each_format {
    ($then:ident) => {
        $then! {
            /// OpenAI Responses input items.
            Responses => responses::Responses,
            /// Anthropic Messages.
            Anthropic => anthropic::Anthropic,
            /// OpenAI Chat Completions messages.
            OpenaiChat => openai_chat::OpenaiChat,
            /// Structured agent events (set_var, tool_call, ...), rendered as prompt text.
            Events => events::Events,
            /// tracetrim JSONL traces (`{"kind": "prompt"|"call"|"message"}`).
            Tracetrim => tracetrim::Tracetrim,
        }
    };
}

pub mod key;
pub use key::Format;

/// [`REGISTRY`] and [`Format::wire`], from [`each_format`]'s list.
macro_rules! registry {
    ($($(#[$meta:meta])* $variant:ident => $module:ident :: $codec:ident,)*) => {
        /// Every wire format, in the order detection asks them whether an item is theirs.
        pub static REGISTRY: &[&dyn WireFormat] = &[$(&$module::$codec,)*];

        impl Format {
            /// The registered implementation of this format.
            pub fn wire(self) -> &'static dyn WireFormat {
                match self {
                    $(Format::$variant => &$module::$codec,)*
                }
            }
        }
    };
}

each_format!(registry);

impl Format {
    /// The stable name used on the command line (`--from`, `--to`).
    pub fn name(self) -> &'static str {
        self.wire().name()
    }

    /// Parses a name given by [`Format::name`].
    pub fn from_name(name: &str) -> Option<Format> {
        by_name(name).map(|w| w.format())
    }
}

/// The registered format with this key.
pub fn wire(format: Format) -> &'static dyn WireFormat {
    format.wire()
}

/// The registered format with this name (`--from`, `--to`).
pub fn by_name(name: &str) -> Option<&'static dyn WireFormat> {
    REGISTRY.iter().copied().find(|w| w.name() == name)
}

/// The message-list format a provider serves at `path` (the part after the host and an
/// optional `/v1`), if any.
///
/// ```
/// use ctxgc_core::Format;
/// assert_eq!(ctxgc_core::formats::by_endpoint("/messages").map(|f| f.format()), Some(Format::Anthropic));
/// assert!(ctxgc_core::formats::by_endpoint("/models").is_none());
/// ```
pub fn by_endpoint(path: &str) -> Option<&'static dyn WireFormat> {
    REGISTRY
        .iter()
        .copied()
        .find(|w| w.endpoint() == Some(path))
}

/// The first registered format that claims `item` (the first item of a list, or the first
/// line of JSONL).
pub fn claiming(item: &Map<String, Value>) -> Option<&'static dyn WireFormat> {
    REGISTRY.iter().copied().find(|w| w.claims_item(item))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_codec_names_its_own_key_and_stores_under_its_name() {
        for codec in REGISTRY {
            let format = codec.format();
            // A codec returning another format's key would make that format unreachable.
            assert!(std::ptr::addr_eq(format.wire(), *codec), "{format:?}");
            assert_eq!(Format::from_name(codec.name()), Some(format));
            // The stored spelling (serde) and the command line's (`name`) are one name.
            assert_eq!(serde_json::to_value(format).ok(), Some(json!(codec.name())));
        }
        let mut names: Vec<&str> = REGISTRY.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len(), "two codecs share a name");
    }
}
