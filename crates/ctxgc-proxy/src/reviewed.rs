//! `--config projection.json`: a reviewed projection, applied as it is, with `expand` over
//! the originals of the most recent trimmed outputs. Trimming and the way back are
//! `ctxgc_core::projection`'s: this file only holds the receipts between a trim and its
//! `expand`.

use std::path::Path;
use std::sync::Mutex;

use ctxgc_core::projection::apply::{MemoryReceipts, ReceiptStore};
use ctxgc_core::projection::{Projection, expand, expand_tool};
use serde_json::Value;

use crate::shaping::{OutputShaper, ShapeError, Shaped, ToolSurface};

/// How many trimmed outputs `expand` can reach back to.
pub const RECEIPTS_KEPT: usize = 256;

/// A reviewed projection and the receipts of what it trimmed.
pub struct ReviewedProjection {
    projection: Projection,
    receipts: Mutex<Box<dyn ReceiptStore + Send>>,
    /// The store of the originals, for savings records (none when they are in memory).
    savings: Option<crate::savings::SavingsSink>,
}

impl ReviewedProjection {
    /// Wraps a projection; the originals of the last [`RECEIPTS_KEPT`] trimmed outputs are
    /// kept in memory.
    pub fn new(projection: Projection) -> Self {
        Self::with_receipts(
            projection,
            Box::new(MemoryReceipts::with_capacity(RECEIPTS_KEPT)),
        )
    }

    /// Wraps a projection, with the originals kept in `receipts` (a
    /// [`crate::receipts::StoreReceipts`] keeps every one, across restarts).
    pub fn with_receipts(projection: Projection, receipts: Box<dyn ReceiptStore + Send>) -> Self {
        ReviewedProjection {
            projection,
            receipts: Mutex::new(receipts),
            savings: None,
        }
    }

    /// Reads a projection file (as `ctxgc learn` writes it, edits included).
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let projection =
            Projection::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(ReviewedProjection::new(projection))
    }

    /// Reads a projection file, with the originals in the store at `location`.
    pub fn load_with_store(path: &Path, location: &ctxgc_store::Location) -> Result<Self, String> {
        let reviewed = Self::load(path)?;
        let receipts = crate::receipts::StoreReceipts::open(location)
            .map_err(|e| format!("{location}: {e}"))?;
        let savings = Some(receipts.savings_sink());
        Ok(ReviewedProjection {
            savings,
            ..Self::with_receipts(reviewed.projection, Box::new(receipts))
        })
    }
}

/// `expand` as `ctxgc_core::projection` describes it, as an MCP tool surface.
pub fn expand_surface() -> ToolSurface {
    let schema = expand_tool();
    let input_schema = match schema.input_schema {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    ToolSurface {
        name: schema.name,
        description: schema.description,
        input_schema,
    }
}

impl OutputShaper for ReviewedProjection {
    fn shape(
        &self,
        tool: &str,
        _arguments: &Value,
        raw: &str,
        is_error: bool,
    ) -> Result<Shaped, ShapeError> {
        let trimmed = self.projection.apply_flagged(tool, raw, is_error);
        if let Some(receipt) = trimmed.receipt {
            let mut receipts = self
                .receipts
                .lock()
                .map_err(|_| ShapeError("receipt store poisoned".into()))?;
            // Without its receipt a trimmed output could not be expanded: give it whole.
            if receipts.put(receipt).is_err() {
                return Ok(Shaped::unchanged(raw));
            }
        }
        Ok(Shaped {
            fields_hidden: trimmed.hidden.len(),
            text: trimmed.text,
        })
    }

    fn may_trim(&self, tool: &str) -> bool {
        self.projection.tools.get(tool).is_some_and(|t| t.trim)
    }

    fn expand_tool(&self) -> Option<ToolSurface> {
        Some(expand_surface())
    }

    fn savings_sink(&self) -> Option<crate::savings::SavingsSink> {
        self.savings.clone()
    }

    fn expand(&self, arguments: &Value) -> Result<String, ShapeError> {
        let receipts = self
            .receipts
            .lock()
            .map_err(|_| ShapeError("receipt store poisoned".into()))?;
        expand(receipts.as_ref(), arguments).map_err(|e| ShapeError(e.to_string()))
    }
}
