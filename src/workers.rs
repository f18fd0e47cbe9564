//! One worker pool for the operations that run many instances at once (validation, replay):
//! `jobs` threads take items from one queue in order until it is empty.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Runs `work` on every item with up to `jobs` threads, each with its own state from `state`
/// (an archive connection, say); returns what each item gave, in the order they ended, and the
/// errors of workers whose state could not be made (their share is taken by the others; with
/// none left, the remaining items are not run).
pub fn run<T, S, E, R>(
    jobs: usize,
    items: Vec<T>,
    state: impl Fn() -> Result<S, E> + Sync,
    work: impl Fn(&mut S, T) -> R + Sync,
) -> (Vec<R>, Vec<E>)
where
    T: Send,
    R: Send,
    E: Send,
{
    let threads = jobs.max(1).min(items.len());
    let queue = Mutex::new(VecDeque::from(items));
    let done = Mutex::new(Vec::new());
    let errors = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut st = match state() {
                    Ok(st) => st,
                    Err(e) => {
                        errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                        return;
                    }
                };
                loop {
                    // The lock is released before the work starts.
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                    let Some(item) = next else { break };
                    let r = work(&mut st, item);
                    done.lock().unwrap_or_else(|p| p.into_inner()).push(r);
                }
            });
        }
    });
    (
        done.into_inner().unwrap_or_else(|p| p.into_inner()),
        errors.into_inner().unwrap_or_else(|p| p.into_inner()),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_item_runs_once_with_its_workers_state() {
        let (mut out, errors) = super::run(
            3,
            (0..50).collect(),
            || Ok::<_, ()>(Vec::new()),
            |seen: &mut Vec<i32>, i: i32| {
                seen.push(i);
                i * 2
            },
        );
        out.sort();
        assert!(errors.is_empty());
        assert_eq!(out, (0..50).map(|i| i * 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_worker_without_state_leaves_its_share_to_the_others() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let (out, errors) = super::run(
            2,
            vec![1, 2, 3],
            || {
                if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    Err("no connection")
                } else {
                    Ok(())
                }
            },
            |_, i: i32| i,
        );
        assert_eq!(errors, ["no connection"]);
        assert_eq!(out.len(), 3);
    }
}
