//! Where the proxy keeps the originals of the outputs it trimmed: a [`ctxgc_store`] database
//! (SQLite by default, PostgreSQL by URL), so `expand` answers for every output ever trimmed,
//! across restarts and after a crash: each original is committed before the trimmed output
//! goes to the agent.
//!
//! An original is stored as a receipt of the session [`PROXY_CONTEXT`] under its reference
//! (content-addressed, so storing it again changes nothing); the tool and the hidden fields,
//! which may differ the next time the same output is trimmed, are a state entry under the
//! same reference, replaced on every trim.
//!
//! The store's clients are blocking (the PostgreSQL one runs a runtime of its own, which
//! may not be started from inside the proxy's): the store lives on a thread of its own, and
//! calls go to it through a channel.

use std::sync::mpsc;

use ctxgc_core::projection::apply::{ReceiptStore, ReceiptStoreError, TrimReceipt};
use ctxgc_store::{AnyStore, Location, Store, StoreError};
use serde::{Deserialize, Serialize};

/// The session under which the proxy's originals are stored.
pub const PROXY_CONTEXT: &str = "ctxgc-proxy";

/// The state scope of the receipts' tool and hidden fields.
const META_SCOPE: &str = "ctxgc-proxy/receipt";

#[derive(Serialize, Deserialize)]
struct Meta {
    tool: String,
    hidden: Vec<String>,
}

/// Work for the store thread.
pub(crate) type Job = Box<dyn FnOnce(&mut AnyStore) + Send>;

/// Receipts in a database, for `expand` after restarts and crashes.
pub struct StoreReceipts {
    jobs: mpsc::Sender<Job>,
    location: String,
}

impl std::fmt::Debug for StoreReceipts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreReceipts")
            .field("location", &self.location)
            .finish()
    }
}

impl StoreReceipts {
    /// Opens (creating and migrating as needed) the database at `location`.
    ///
    /// ```
    /// use ctxgc_core::projection::apply::{ReceiptStore, TrimReceipt};
    /// use ctxgc_proxy::receipts::StoreReceipts;
    /// let dir = tempfile::tempdir().unwrap();
    /// let location = ctxgc_store::Location::Sqlite(dir.path().join("ctxgc.db"));
    /// let mut store = StoreReceipts::open(&location).unwrap();
    /// store.put(TrimReceipt { reference: "abcdefghij".into(), tool: "t".into(),
    ///     original: "{\"a\":1}".into(), hidden: vec!["a".into()] }).unwrap();
    /// drop(store);
    /// let store = StoreReceipts::open(&location).unwrap();
    /// assert_eq!(store.get("abcdefghij").unwrap().unwrap().original, "{\"a\":1}");
    /// ```
    pub fn open(location: &Location) -> Result<Self, StoreError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, opened) = mpsc::channel::<Result<(), StoreError>>();
        let target = location.clone();
        std::thread::Builder::new()
            .name("ctxgc-proxy-store".into())
            .spawn(move || match ctxgc_store::open(&target) {
                Ok(mut store) => {
                    let _ = ready.send(Ok(()));
                    for job in queue {
                        job(&mut store);
                    }
                }
                Err(err) => {
                    let _ = ready.send(Err(err));
                }
            })
            .map_err(|e| StoreError::Backend {
                backend: "store",
                message: format!("cannot start the store thread: {e}"),
            })?;
        opened.recv().map_err(|_| StoreError::Backend {
            backend: "store",
            message: "the store thread ended while opening".into(),
        })??;
        Ok(StoreReceipts {
            jobs,
            location: location.to_string(),
        })
    }

    /// A handle that writes savings records to the same store, on the same thread.
    pub fn savings_sink(&self) -> crate::savings::SavingsSink {
        crate::savings::SavingsSink::new(self.jobs.clone())
    }

    /// Where the receipts are (a URL without its password).
    pub fn location(&self) -> &str {
        &self.location
    }

    fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut AnyStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ReceiptStoreError> {
        let (reply, answer) = mpsc::channel();
        self.jobs
            .send(Box::new(move |store| {
                let _ = reply.send(job(store));
            }))
            .map_err(|_| ReceiptStoreError("the store thread has stopped".into()))?;
        answer
            .recv()
            .map_err(|_| ReceiptStoreError("the store thread has stopped".into()))?
            .map_err(|e| ReceiptStoreError(e.to_string()))
    }
}

impl ReceiptStore for StoreReceipts {
    fn put(&mut self, receipt: TrimReceipt) -> Result<(), ReceiptStoreError> {
        let meta = serde_json::to_vec(&Meta {
            tool: receipt.tool,
            hidden: receipt.hidden,
        })
        .map_err(|e| ReceiptStoreError(e.to_string()))?;
        let reference = receipt.reference;
        let original = receipt.original;
        self.run(move |store| {
            // The original first: a reference with meta always has its original.
            store.put_receipt(PROXY_CONTEXT, &reference, original.as_bytes())?;
            store.put_state(META_SCOPE, &reference, &meta)
        })
    }

    fn get(&self, reference: &str) -> Result<Option<TrimReceipt>, ReceiptStoreError> {
        let key = reference.to_owned();
        let found = self.run(move |store| {
            let Some(meta) = store.state(META_SCOPE, &key)? else {
                return Ok(None);
            };
            Ok(store
                .receipt(PROXY_CONTEXT, &key)?
                .map(|original| (meta, original)))
        })?;
        let Some((meta, original)) = found else {
            return Ok(None);
        };
        let meta: Meta = serde_json::from_slice(&meta).map_err(|e| {
            ReceiptStoreError(format!("receipt {reference}: unreadable fields list: {e}"))
        })?;
        let original = String::from_utf8(original)
            .map_err(|_| ReceiptStoreError(format!("receipt {reference}: not UTF-8")))?;
        Ok(Some(TrimReceipt {
            reference: reference.to_owned(),
            tool: meta.tool,
            original,
            hidden: meta.hidden,
        }))
    }
}

/// The receipts a `receipts.json` of an earlier version holds (a `MemoryReceipts` saved as
/// JSON), in file order.
pub fn read_receipts_file(text: &str) -> Result<Vec<TrimReceipt>, String> {
    #[derive(Deserialize)]
    struct Saved {
        receipts: std::collections::BTreeMap<String, TrimReceipt>,
    }
    serde_json::from_str::<Saved>(text)
        .map(|saved| saved.receipts.into_values().collect())
        .map_err(|e| e.to_string())
}
