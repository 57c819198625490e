//! Live quota changes racing decisions on several threads, at a frozen clock, with exact
//! totals: whatever the interleaving, the admissions are those of some sequential order of the
//! changes and the decisions, each decided wholly under one quota.
//!
//! - A fixed window whose limit alternates between 40 and 100 while 4 threads decide: every
//!   admission is the k-th unit of the window for a distinct k, decided under a limit of at least
//!   k (its `remaining` says which: `limit - k`), so the admitted total is at most 100, at least
//!   40, and the window's count is exactly that total.
//! - A token bucket alternating between two rates: every admission's reset-after is the TAT it
//!   stored, so sorted they form one chain, each step one interval of the quota its decision was
//!   made under, within that quota's burst; the final TAT is the chain's end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use tollgate::{Decision, DirectLimiter, FixedWindow, Live, ManualClock, Quota, Timestamp, TokenBucket};

const THREADS: usize = 4;
const CALLS: usize = 300;
const ROUNDS: usize = 30;

/// Runs `THREADS` deciders (`decide`) and one changer (`change`, alternating until the
/// deciders are done) from one barrier; returns every decision.
fn race<L: Send + Sync + 'static>(
    limiter: &Arc<L>,
    decide: fn(&L) -> Decision,
    change: impl Fn(&L, bool) + Send + 'static,
) -> Vec<Decision> {
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(AtomicBool::new(false));
    let changer = {
        let (limiter, barrier, done) = (Arc::clone(limiter), Arc::clone(&barrier), Arc::clone(&done));
        thread::spawn(move || {
            barrier.wait();
            let mut high = false;
            // SeqCst: a test's stop flag; nothing else is published through it.
            while !done.load(Ordering::SeqCst) {
                high = !high;
                change(&limiter, high);
                thread::yield_now();
            }
        })
    };
    let deciders: Vec<_> = (0..THREADS)
        .map(|_| {
            let (limiter, barrier) = (Arc::clone(limiter), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                (0..CALLS).map(|_| decide(&limiter)).collect::<Vec<_>>()
            })
        })
        .collect();
    let decisions = deciders
        .into_iter()
        .flat_map(|decider| decider.join().expect("no panic"))
        .collect();
    done.store(true, Ordering::SeqCst);
    changer.join().expect("no panic");
    decisions
}

/// Whether each admission `i` can take a distinct unit `k` in `1..=total` among its two
/// candidates `(limit - remaining)` for the two limits: Kuhn's augmenting paths.
fn distinct_units(candidates: &[Vec<u64>], total: u64) -> bool {
    fn augment(i: usize, candidates: &[Vec<u64>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
        for &k in &candidates[i] {
            let k = k as usize;
            if seen[k] {
                continue;
            }
            seen[k] = true;
            if owner[k].is_none_or(|other| augment(other, candidates, seen, owner)) {
                owner[k] = Some(i);
                return true;
            }
        }
        false
    }
    let mut owner = vec![None; total as usize + 1];
    (0..candidates.len()).all(|i| augment(i, candidates, &mut vec![false; total as usize + 1], &mut owner))
}

type Window = DirectLimiter<Live<FixedWindow>, ManualClock>;

#[test]
fn a_window_limit_alternating_under_four_threads_admits_a_sequential_total() {
    const LOW: u64 = 40;
    const HIGH: u64 = 100;
    let at = Timestamp::from_secs(1_700_000_000);
    let quota = |limit| Quota::per_minute(limit).expect("valid");
    for _ in 0..ROUNDS {
        let limiter: Arc<Window> = Arc::new(DirectLimiter::with_clock(
            Live::new(FixedWindow::new(quota(LOW)).expect("valid")),
            ManualClock::starting_at(at),
        ));
        let decisions = race(&limiter, Window::check, move |limiter, high| {
            let limit = if high { HIGH } else { LOW };
            limiter.algorithm().set_quota(quota(limit)).expect("live");
        });
        let admitted: Vec<&Decision> = decisions.iter().filter(|d| d.is_allowed()).collect();
        let total = admitted.len() as u64;
        assert!((LOW..=HIGH).contains(&total), "admitted {total}");
        // Every refusal found the window at or past its limit: nothing remained.
        assert!(decisions
            .iter()
            .filter(|d| !d.is_allowed())
            .all(|d| d.remaining() == 0));
        let candidates: Vec<Vec<u64>> = admitted
            .iter()
            .map(|d| {
                [LOW, HIGH]
                    .iter()
                    .filter_map(|limit| limit.checked_sub(d.remaining()))
                    .filter(|k| (1..=total).contains(k))
                    .collect()
            })
            .collect();
        assert!(
            distinct_units(&candidates, total),
            "no sequential order admits these {total}"
        );
        limiter.algorithm().set_quota(quota(HIGH)).expect("live");
        assert_eq!(
            limiter.peek_n_at(0, at).expect("fits").remaining(),
            HIGH - total,
            "the count"
        );
    }
}

type Bucket = DirectLimiter<Live<TokenBucket>, ManualClock>;

#[test]
fn a_bucket_rate_alternating_under_four_threads_admits_one_chain() {
    // 1 per 10 ms with a burst of 60, and 1 per 25 ms with a burst of 10 (250 ms of tolerance).
    let fast: Quota = "100/s burst 60".parse().expect("valid");
    let slow: Quota = "40/s burst 10".parse().expect("valid");
    let (t_fast, tol_fast, t_slow, tol_slow) = (10_000_000u64, 600_000_000u64, 25_000_000u64, 250_000_000u64);
    let at = Timestamp::from_secs(1_700_000_000);
    let (mut fast_steps, mut slow_steps) = (0, 0);
    for _ in 0..ROUNDS {
        let limiter: Arc<Bucket> = Arc::new(DirectLimiter::with_clock(
            Live::new(TokenBucket::new(slow).expect("valid")),
            ManualClock::starting_at(at),
        ));
        let decisions = race(&limiter, Bucket::check, move |limiter, high| {
            limiter
                .algorithm()
                .set_quota(if high { fast } else { slow })
                .expect("live");
        });
        let mut ends: Vec<u64> = decisions
            .iter()
            .filter(|d| d.is_allowed())
            .map(|d| u64::try_from(d.reset_after().as_nanos()).expect("fits"))
            .collect();
        ends.sort_unstable();
        let mut previous = 0;
        for &end in &ends {
            let step = end - previous;
            assert!(
                (step == t_fast && end <= tol_fast) || (step == t_slow && end <= tol_slow),
                "an admission ending {end} ns after {previous}: a step of {step} ns is neither quota's, or past its burst"
            );
            match step == t_fast {
                true => fast_steps += 1,
                false => slow_steps += 1,
            }
            previous = end;
        }
        assert!(ends.len() >= 10, "the slow quota's burst alone admits 10");
        let tat = limiter.raw_state() - at.as_nanos();
        assert_eq!(tat, previous, "the final TAT ends the chain");
    }
    // The changes raced the decisions: admissions were decided under both quotas.
    assert!(
        fast_steps > 0 && slow_steps > 0,
        "{fast_steps} fast, {slow_steps} slow"
    );
}
