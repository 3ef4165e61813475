//! [`Format`]: the key a session stores and the lowest layers name a format by, made from the
//! registry's list (`each_format!` in `formats/mod.rs`) and depending on no code, so naming a
//! format does not pull in its codec. What a format does is asked of its codec,
//! [`Format::wire`].

use serde::{Deserialize, Serialize};

/// The key type, from the registry's list.
macro_rules! key {
    ($($(#[$meta:meta])* $variant:ident => $module:ident :: $codec:ident,)*) => {
        /// Which input format a session was lowered from; the back-end renders the same one.
        /// One variant per registered format ([`crate::formats::REGISTRY`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Format {
            $($(#[$meta])* $variant,)*
        }
    };
}

each_format!(key);
