//! Order-preserving parallel map for large inputs.
//!
//! Lowering a trace is the same work item after item, and no item's result depends on
//! another's, so a large trace is cut into one contiguous run of items per core and each run
//! is lowered on its own thread. Results come back in input order, so the output (and every
//! error list) is byte-identical to a sequential run whatever the number of cores.
//!
//! Small inputs stay on the calling thread: starting a thread costs tens of microseconds,
//! more than lowering a short trace.

use std::mem::MaybeUninit;
use std::num::NonZeroUsize;

/// Below this much work per thread, another thread does not pay for itself. Work is counted
/// in bytes of input at the speed of lowering JSON (about 100 MB/s on one core, so this is
/// about 2.5 ms); a step that costs more per byte scales its bytes up.
const MIN_WORK_PER_THREAD: usize = 256 * 1024;

/// At most this many threads, however many cores the machine has: lowering is bound by
/// memory bandwidth long before.
const MAX_THREADS: usize = 8;

/// How many threads to do `work` (see [`MIN_WORK_PER_THREAD`]) spread over `items` items with.
fn threads_for(items: usize, work: usize) -> usize {
    let by_size = work / MIN_WORK_PER_THREAD;
    if by_size < 2 || items < 2 {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    cores.min(MAX_THREADS).min(by_size).min(items)
}

/// `items` mapped by `f(index, item)`, in order; the work is spread over the machine's cores
/// when it is large enough to pay for threads. `work` is its size in bytes of input at the
/// speed of lowering JSON: the input size the items stand for, scaled up for a step that
/// costs more per byte.
///
/// ```
/// let squares = ctxgc_core::parallel::map_in_order(&[1, 2, 3], 3, |i, x| (i, x * x));
/// assert_eq!(squares, [(0, 1), (1, 4), (2, 9)]);
/// ```
pub fn map_in_order<T, R, F>(items: &[T], work: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(usize, &T) -> R + Sync,
{
    let threads = threads_for(items.len(), work);
    if threads <= 1 {
        return items.iter().enumerate().map(|(i, x)| f(i, x)).collect();
    }
    // The results are written straight into their final place, each thread into its own run
    // of the vector's spare capacity: nothing is copied from one vector into another, and the
    // fresh pages a large trace needs are touched (and paid for) by every core at once.
    let mut results: Vec<R> = Vec::with_capacity(items.len());
    let run = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let spare = &mut results.spare_capacity_mut()[..items.len()];
        let mut parts = items.chunks(run).zip(spare.chunks_mut(run)).enumerate();
        // The calling thread takes the first run itself.
        let first = parts.next();
        for (k, (input, output)) in parts {
            scope.spawn(move || fill(k * run, input, output, f));
        }
        if let Some((_, (input, output))) = first {
            fill(0, input, output, f);
        }
    });
    // SAFETY: the runs cover the first `items.len()` slots exactly once (`chunks` of the same
    // length over inputs and slots), and `fill` writes every slot of its run. Had any thread
    // panicked, `scope` would have resumed the panic before this line, leaving the length at
    // zero: the written results leak, none is read uninitialised.
    unsafe { results.set_len(items.len()) };
    results
}

/// `f` applied to each of `targets` (which it may change), the results in order. With
/// `spread`, each target after the first gets a thread of its own and the calling thread takes
/// the first; the machine's scheduler shares the cores between them. For a few independent,
/// uneven jobs (the passes of a compile), where cutting one list into runs does not apply.
///
/// ```
/// let mut counters = [1, 2, 3];
/// let doubled = ctxgc_core::parallel::each_mut(counters.iter_mut().collect(), true, |c| {
///     *c *= 2;
///     *c
/// });
/// assert_eq!((doubled, counters), (vec![2, 4, 6], [2, 4, 6]));
/// ```
pub fn each_mut<T, R, F>(targets: Vec<&mut T>, spread: bool, f: F) -> Vec<R>
where
    T: Send + ?Sized,
    R: Send,
    F: Fn(&mut T) -> R + Sync,
{
    // Asking for the cores reads the process's limits: only a spread call pays for it.
    let spread = spread
        && targets.len() >= 2
        && std::thread::available_parallelism().map_or(1, NonZeroUsize::get) >= 2;
    if !spread {
        return targets.into_iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|scope| {
        let mut targets = targets.into_iter();
        let first = targets.next();
        let others: Vec<_> = targets.map(|t| scope.spawn(move || f(t))).collect();
        let mut results = Vec::with_capacity(others.len() + 1);
        results.extend(first.map(f));
        for handle in others {
            // A panic in a job is the caller's panic, as it would be on one thread.
            results.push(
                handle
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
            );
        }
        results
    })
}

fn fill<T, R>(
    start: usize,
    input: &[T],
    output: &mut [MaybeUninit<R>],
    f: &impl Fn(usize, &T) -> R,
) {
    debug_assert_eq!(input.len(), output.len());
    for (offset, (x, slot)) in input.iter().zip(output.iter_mut()).enumerate() {
        slot.write(f(start + offset, x));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_inputs_stay_on_one_thread() {
        assert_eq!(threads_for(10, 1000), 1);
        assert_eq!(threads_for(1, 100 << 20), 1);
    }

    #[test]
    fn large_inputs_give_the_same_results_in_the_same_order() {
        let items: Vec<u64> = (0..10_007).collect();
        let expected: Vec<(usize, u64)> = items.iter().map(|&x| (x as usize, x * 3)).collect();
        // Sized as a 100 MB input: as many threads as the machine allows.
        let got = map_in_order(&items, 100 << 20, |i, &x| (i, x * 3));
        assert_eq!(got, expected);
        // Every run length, including runs that do not divide the items evenly.
        for n in [2, 3, 5, 17, 64] {
            let few: Vec<u64> = (0..n).collect();
            let got = map_in_order(&few, 100 << 20, |i, &x| i as u64 + x);
            let want: Vec<u64> = few.iter().map(|&x| 2 * x).collect();
            assert_eq!(got, want, "{n} items");
        }
    }

    #[test]
    fn owned_results_are_moved_in_once() {
        let items: Vec<String> = (0..5_000).map(|i| format!("item {i}")).collect();
        let got = map_in_order(&items, 100 << 20, |i, s| format!("{i}: {s}"));
        assert_eq!(got.len(), items.len());
        assert_eq!(got[4_999], "4999: item 4999");
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, s)| s == &format!("{i}: item {i}"))
        );
    }

    #[test]
    fn each_mut_changes_every_target_and_keeps_the_order() {
        for spread in [false, true] {
            let mut totals: Vec<u64> = (0..9).collect();
            let seen = each_mut(totals.iter_mut().collect(), spread, |t| {
                *t = (0..=*t).sum();
                *t
            });
            let want: Vec<u64> = (0..9).map(|n| (0..=n).sum()).collect();
            assert_eq!((seen, &totals), (want.clone(), &want), "spread: {spread}");
        }
        let outcome = std::panic::catch_unwind(|| {
            let mut jobs = [0, 1, 2];
            each_mut(jobs.iter_mut().collect(), true, |j| {
                assert_ne!(*j, 2, "job 2 fails")
            });
        });
        assert!(outcome.is_err(), "a failed job was lost");
    }

    #[test]
    fn a_panic_on_any_thread_reaches_the_caller() {
        let items: Vec<usize> = (0..1_000).collect();
        for bad in [0, 999] {
            let outcome = std::panic::catch_unwind(|| {
                map_in_order(&items, 100 << 20, |i, _| {
                    assert_ne!(i, bad, "item {bad} fails");
                    i.to_string()
                })
            });
            assert!(outcome.is_err(), "the failure at item {bad} was lost");
        }
    }
}
