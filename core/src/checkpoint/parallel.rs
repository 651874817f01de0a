//! Running the file work of one LCP round for many fragments at once: a small scoped
//! worker pool (NDB's LCP hands its file opens, writes, syncs and closes to NDBFS
//! threads, so that the fragments' fdatasyncs wait together, not one after the other).
//!
//! [`run_parallel`] applies a function to every item on at most `max_threads` threads
//! and returns the results in the items' order (not in completion order), so what the
//! caller does with them does not depend on thread timing. A panic in the function is
//! returned as an internal error for its item; the other items still run.
//!
//! Lock order: none held here; the function takes whatever it needs.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Result, codes};

/// Most threads a round's file work runs on (they wait on the disk, not the CPU).
pub const LCP_IO_THREADS: usize = 8;

/// `f(index, item)` for every item, on up to `max_threads` threads (the caller's thread
/// alone for a single item or `max_threads <= 1`); results in item order.
pub fn run_parallel<T, R, F>(items: Vec<T>, max_threads: usize, f: F) -> Vec<Result<R>>
where
    T: Send,
    R: Send,
    F: Fn(usize, T) -> Result<R> + Sync,
{
    let n = items.len();
    let threads = max_threads.min(n);
    if threads <= 1 {
        return items
            .into_iter()
            .enumerate()
            .map(|(i, t)| f(i, t))
            .collect();
    }
    // Each item is taken exactly once: by the worker that claims its index.
    let slots: Vec<parking_lot::Mutex<Option<T>>> = items
        .into_iter()
        .map(|t| parking_lot::Mutex::new(Some(t)))
        .collect();
    let results: Vec<parking_lot::Mutex<Option<Result<R>>>> =
        (0..n).map(|_| parking_lot::Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            let Some(item) = slots[i].lock().take() else {
                continue;
            };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i, item)))
                .unwrap_or_else(|_| {
                    Err(codes::internal(format!(
                        "an LCP worker thread panicked (item {i})"
                    )))
                });
            *results[i].lock() = Some(r);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.into_inner()
                .unwrap_or_else(|| Err(codes::internal(format!("LCP work item {i} never ran"))))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_item_order_and_every_item_once() {
        let items: Vec<u32> = (0..50).collect();
        let calls = AtomicUsize::new(0);
        let out = run_parallel(items, 4, |i, v| {
            calls.fetch_add(1, Ordering::Relaxed);
            assert_eq!(i as u32, v);
            if v == 7 {
                return Err(codes::internal("seven"));
            }
            Ok(v * 2)
        });
        assert_eq!(calls.load(Ordering::Relaxed), 50);
        assert_eq!(out.len(), 50);
        for (i, r) in out.iter().enumerate() {
            match r {
                Ok(v) => assert_eq!(*v, i as u32 * 2),
                Err(e) => {
                    assert_eq!(i, 7);
                    assert!(e.message.contains("seven"));
                }
            }
        }
    }

    #[test]
    fn a_panic_is_an_error_of_its_item_only() {
        let out = run_parallel(vec![1u32, 2, 3], 3, |_, v| {
            if v == 2 {
                panic!("boom");
            }
            Ok(v)
        });
        assert_eq!(out[0].as_ref().ok(), Some(&1));
        assert!(out[1].is_err());
        assert_eq!(out[2].as_ref().ok(), Some(&3));
        let serial = run_parallel(vec![5u32], 8, |_, v| Ok(v + 1));
        assert_eq!(serial[0].as_ref().ok(), Some(&6));
    }
}
