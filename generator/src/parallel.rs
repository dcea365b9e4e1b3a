//! Independent pieces of one run (types per served version, files per template) spread over
//! the machine's cores, with the results in input order.
//!
//! Order is what keeps output deterministic: each piece is a pure function of its input, and
//! the caller gets the results as if they had been computed one after another.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::limits::STACK_BYTES;

/// `work` applied to every item, on as many threads as the machine has cores (at most one per
/// item), each with [`STACK_BYTES`] of stack like the thread [`crate::generate`] runs on, so
/// that input nested up to the caps cannot overflow a worker's stack either.
///
/// Workers take the next item as they become free, so a slow item does not hold up the rest;
/// callers put the items they expect to be slowest first. A panic in `work` continues on the
/// calling thread. Should no thread be had, the items are done here.
pub fn map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut done = Vec::new();
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(index) else {
                return done;
            };
            done.push((index, work(item)));
        }
    };
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .name("operator-gen".to_owned())
                    .stack_size(STACK_BYTES)
                    .spawn_scoped(scope, worker)
                    .ok()
            })
            .collect();
        // With no thread at all, this thread does every item.
        let here = handles.is_empty().then(worker).into_iter();
        let joined = handles.into_iter().map(|handle| {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        for (index, result) in here.chain(joined).flatten() {
            slots[index] = Some(result);
        }
    });
    slots
        .into_iter()
        .map(|slot| slot.expect("every item was taken by exactly one worker"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_input_order_whatever_the_order_of_work() {
        let items: Vec<u64> = (0..64).collect();
        // Early items take longest, so later ones finish first on another thread.
        let squares = map(&items, |&n| {
            std::thread::sleep(std::time::Duration::from_micros((64 - n) * 50));
            n * n
        });
        assert_eq!(squares, items.iter().map(|n| n * n).collect::<Vec<_>>());
        assert!(map(&[] as &[u8], |_| 0).is_empty());
    }

    #[test]
    fn a_panic_in_a_worker_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            map(&[1, 2, 3], |&n| {
                assert_ne!(n, 2, "the second item fails");
                n
            })
        });
        assert!(caught.is_err());
    }
}
