//! The tower layer's refunds through Redis, sent in the order each key's slots were given back.
//!
//! A shaped request whose client leaves gives its slot back only if it still ends its key's
//! queue (`gcra_refund.lua` compares), so clients D, C and B leaving in that order give back all
//! three only if Redis runs D's refund before C's and C's before B's. A task per refund lets a
//! multi-threaded runtime send them in any order, and then all but one can find the queue ending
//! elsewhere and give nothing back: 24 to 76 of 200 such rounds lose a refund so
//! (`tests/redis/refund_layer.rs`, `slots_given_back_from_the_end_of_the_queue_all_come_back`,
//! checks that none is lost).
//!
//! So each key's refunds form a chain: the first starts a task on the caller's runtime, which
//! sends it and then every refund of that key queued behind it meanwhile, one round trip at a
//! time, and ends when none is left. Keys do not wait for each other (with one queue for every
//! key, a refund waits behind thousands of others, until a new request has taken the slot after
//! its own and it gives nothing back; `a_keys_refund_does_not_wait_for_other_keys_refunds`
//! checks that it does not), and each chain runs on a runtime that is running a refund of its
//! key.
//!
//! One queue serves every Redis limiter of the process ([`REFUNDS`]), each limiter's refunds
//! apart from the others' (its chains, its bounds), as if each limiter had a queue of its own:
//! a limiter is told apart by its breakers, the `Arc` that each of its refunds holds
//! ([`Limiter`]).
//!
//! The refunds waiting are bounded, per key ([`MOST_WAITING_PER_KEY`]) and all keys of a limiter
//! together ([`MOST_WAITING`]): where clients leave faster than Redis answers (a slow server, a
//! deadline of seconds), the queues would otherwise grow for as long as that lasts. Past a bound,
//! new refunds are dropped, as a refund that fails is: their units stay charged (never more
//! admitted than without refunds), and the chains already queued stay whole, since each refund
//! of a chain gives back only after the one before it (dropping the oldest instead would break
//! them). The per-key bound is large, so that a burst on one key (a shaper's long queue whose
//! clients all leave) is not cut short, and a sixteenth of the total, so that one key whose chain
//! is stuck (its runtime kept but no longer run) cannot take the whole budget from the others.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use crate::distributed::breakers::Breakers;
use crate::distributed::refund::Refund;

/// How many refunds of one limiter may wait, all keys together, behind those in flight: about
/// 7 MB of refunds (112 bytes each), tens of megabytes at worst with their keys and queues.
pub(crate) const MOST_WAITING: usize = 65_536;

/// How many refunds of one key may wait behind the one in flight.
pub(crate) const MOST_WAITING_PER_KEY: usize = MOST_WAITING / 16;

/// The queue of every Redis limiter's refunds through the tower layer.
pub(crate) static REFUNDS: LazyLock<RefundQueue> = LazyLock::new(RefundQueue::default);

/// What the queue sends: a [`Refund`]; in this module's tests, a stand-in that needs no Redis.
pub(crate) trait Queued: Send + 'static {
    /// Whose refunds these are: each owner's are queued and bounded apart from the others'.
    type Owner: Hash + Eq + Send + 'static;

    /// This refund's owner.
    fn owner(&self) -> Self::Owner;

    /// The key whose refunds must reach Redis in order.
    fn key(&self) -> &str;

    /// Sends it (best effort: nobody is left to tell of a failure).
    fn send(self) -> impl Future<Output = ()> + Send;
}

/// A Redis limiter, as the owner of its refunds: its breakers, compared by address. Every
/// refund of a limiter holds them, so while one waits no other limiter can have their address.
pub(crate) struct Limiter(Arc<Breakers>);

impl PartialEq for Limiter {
    fn eq(&self, other: &Limiter) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Limiter {}

impl Hash for Limiter {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.0).hash(state);
    }
}

impl Queued for Refund {
    type Owner = Limiter;

    fn owner(&self) -> Limiter {
        Limiter(Arc::clone(&self.breakers))
    }

    fn key(&self) -> &str {
        &self.key
    }

    async fn send(self) {
        let _ = self.run().await;
    }
}

/// The refunds of each key of one owner waiting behind the one of that key in flight.
struct Waiting<R> {
    /// A key is present while a chain of its refunds runs; its queue holds those to send next.
    keys: HashMap<String, VecDeque<R>>,
    /// The refunds in all the queues.
    queued: usize,
}

impl<R> Default for Waiting<R> {
    fn default() -> Self {
        Waiting {
            keys: HashMap::new(),
            queued: 0,
        }
    }
}

/// Each owner's waiting refunds; an owner is present while a chain of its refunds runs.
type Shared<R> = Mutex<HashMap<<R as Queued>::Owner, Waiting<R>>>;

/// The refunds waiting for the one of their key in flight.
pub(crate) struct RefundQueue<R: Queued = Refund> {
    waiting: Arc<Shared<R>>,
}

impl<R: Queued> Default for RefundQueue<R> {
    fn default() -> Self {
        RefundQueue {
            waiting: Arc::default(),
        }
    }
}

impl<R: Queued> std::fmt::Debug for RefundQueue<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefundQueue")
            .field("owners", &lock(&self.waiting).len())
            .finish()
    }
}

/// No panic runs under this lock (map and queue operations only), so a poisoned one holds
/// consistent data.
fn lock<R: Queued>(waiting: &Shared<R>) -> MutexGuard<'_, HashMap<R::Owner, Waiting<R>>> {
    waiting.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<R: Queued> RefundQueue<R> {
    /// Sends `refund` after the refunds of its key given back before it: at once, on a task of
    /// the current tokio runtime, if none of its key is in flight. Outside a runtime, or when
    /// [`MOST_WAITING_PER_KEY`] of its key or [`MOST_WAITING`] of its owner wait already, nothing
    /// is given back (best effort, as every refund of the layer).
    pub(crate) fn push(&self, refund: R) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            // A lock on this cold path only (a client leaving a shaped wait).
            let mut owners = lock(&self.waiting);
            let waiting = owners.entry(refund.owner()).or_default();
            let full = waiting.queued >= MOST_WAITING;
            if let Some(queue) = waiting.keys.get_mut(refund.key()) {
                if !full && queue.len() < MOST_WAITING_PER_KEY {
                    queue.push_back(refund);
                    waiting.queued += 1;
                }
                return;
            }
            waiting.keys.insert(refund.key().to_owned(), VecDeque::new());
        }
        // The claim is made here, not in the task: a task dropped before its first poll (its
        // runtime shut down, or never run) still gives the key up.
        let claim = Chain {
            owner: Some(refund.owner()),
            key: refund.key().to_owned(),
            waiting: Arc::clone(&self.waiting),
        };
        runtime.spawn(chain(claim, refund));
    }
}

/// Sends `first`, then every refund of its key queued behind it, one after the other; the key
/// leaves the map when none is left, or when the task is dropped (its runtime shut down), so
/// that a later refund of the key starts a new chain instead of waiting behind a dead one.
async fn chain<R: Queued>(mut chain: Chain<R>, first: R) {
    let mut next = Some(first);
    while let Some(refund) = next {
        refund.send().await;
        next = chain.next();
    }
}

/// A running chain's claim on its key.
struct Chain<R: Queued> {
    /// The owner of the chain's refunds; `None` once the chain gave its key up (then another
    /// chain may hold it now).
    owner: Option<R::Owner>,
    key: String,
    waiting: Arc<Shared<R>>,
}

impl<R: Queued> Chain<R> {
    /// The refund of the chain's key queued next, or `None` when none is left: the chain then
    /// gives its key up.
    fn next(&mut self) -> Option<R> {
        let mut owners = lock(&self.waiting);
        let waiting = owners.get_mut(self.owner.as_ref()?)?;
        let next = waiting.keys.get_mut(&self.key).and_then(VecDeque::pop_front);
        match next {
            Some(_) => waiting.queued -= 1,
            None => drop(give_up(&mut owners, &mut self.owner, &self.key)),
        }
        next
    }
}

/// Removes `key` of `owner` (which becomes `None`), and the owner once none of its keys is
/// left; returns the refunds that were queued behind.
fn give_up<R: Queued>(
    owners: &mut HashMap<R::Owner, Waiting<R>>,
    owner: &mut Option<R::Owner>,
    key: &str,
) -> Option<VecDeque<R>> {
    let owner = owner.take()?;
    let waiting = owners.get_mut(&owner)?;
    let lost = waiting.keys.remove(key);
    waiting.queued -= lost.as_ref().map_or(0, VecDeque::len);
    if waiting.keys.is_empty() {
        owners.remove(&owner);
    }
    lost
}

impl<R: Queued> Drop for Chain<R> {
    fn drop(&mut self) {
        // Dropped mid-chain (its runtime shut down): the refunds queued behind are lost with
        // their runtime (and dropped after the lock is released).
        let lost = give_up(&mut lock(&self.waiting), &mut self.owner, &self.key);
        drop(lost);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::sync::Semaphore;

    use super::*;

    /// A refund of limiter `owner` that waits for its gate, then records its key and number.
    struct Probe {
        owner: u8,
        key: &'static str,
        number: usize,
        gate: Arc<Semaphore>,
        sent: Arc<Mutex<Vec<(&'static str, usize)>>>,
    }

    impl Queued for Probe {
        type Owner = u8;

        fn owner(&self) -> u8 {
            self.owner
        }

        fn key(&self) -> &str {
            self.key
        }

        async fn send(self) {
            let _pass = self.gate.acquire().await;
            self.sent.lock().unwrap().push((self.key, self.number));
        }
    }

    fn probes(
        key: &'static str,
        gate: &Arc<Semaphore>,
        sent: &Arc<Mutex<Vec<(&'static str, usize)>>>,
    ) -> impl Fn(usize) -> Probe {
        let (gate, sent) = (Arc::clone(gate), Arc::clone(sent));
        move |number| Probe {
            owner: 0,
            key,
            number,
            gate: Arc::clone(&gate),
            sent: Arc::clone(&sent),
        }
    }

    /// What owner 0 has waiting: the length of each key's queue, and their sum.
    struct Snapshot {
        keys: HashMap<String, usize>,
        queued: usize,
    }

    /// Owner 0's waiting refunds (none when it is not in the map: it has no chain).
    fn waiting(queue: &RefundQueue<Probe>) -> Snapshot {
        let owners = lock(&queue.waiting);
        let keys = owners.get(&0).map_or_else(HashMap::new, |waiting| {
            waiting
                .keys
                .iter()
                .map(|(key, queue)| (key.clone(), queue.len()))
                .collect()
        });
        let queued = owners.get(&0).map_or(0, |waiting| waiting.queued);
        Snapshot { keys, queued }
    }

    /// Lets the runtime run every task that can run.
    async fn settle() {
        for _ in 0..1_000 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_keys_refunds_go_in_order_and_those_past_the_bound_are_dropped() {
        let queue = RefundQueue::default();
        let (gate, sent) = (Arc::new(Semaphore::new(0)), Arc::default());
        let refund = probes("a", &gate, &sent);
        // The first is in flight (held at its gate); MOST_WAITING_PER_KEY wait; 10 more go.
        for number in 0..MOST_WAITING_PER_KEY + 11 {
            queue.push(refund(number));
        }
        settle().await;
        assert!(sent.lock().unwrap().is_empty());
        assert_eq!(waiting(&queue).keys["a"], MOST_WAITING_PER_KEY);
        assert_eq!(waiting(&queue).queued, MOST_WAITING_PER_KEY);
        gate.add_permits(Semaphore::MAX_PERMITS);
        for _ in 0..1_000 {
            if sent.lock().unwrap().len() > MOST_WAITING_PER_KEY || waiting(&queue).keys.is_empty() {
                break;
            }
            settle().await;
        }
        let expected: Vec<_> = (0..=MOST_WAITING_PER_KEY).map(|number| ("a", number)).collect();
        assert_eq!(*sent.lock().unwrap(), expected);
        // The chain ended and gave its key up: the next refund starts a new one.
        assert!(waiting(&queue).keys.is_empty());
        assert_eq!(waiting(&queue).queued, 0);
        queue.push(refund(1_000));
        settle().await;
        assert_eq!(sent.lock().unwrap().last(), Some(&("a", 1_000)));
    }

    #[tokio::test]
    async fn the_bound_counts_every_keys_refunds() {
        let queue = RefundQueue::default();
        let (held, sent) = (Arc::new(Semaphore::new(0)), Arc::default());
        const KEYS: [&str; 16] = [
            "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11", "k12", "k13", "k14",
            "k15",
        ];
        assert_eq!(KEYS.len() * MOST_WAITING_PER_KEY, MOST_WAITING);
        for key in KEYS {
            let refund = probes(key, &held, &sent);
            for number in 0..=MOST_WAITING_PER_KEY {
                queue.push(refund(number));
            }
        }
        // 16 in flight, MOST_WAITING waiting: another key's chain still starts (nothing of it
        // waits), but nothing queues behind it, although its own queue is empty.
        queue.push(probes("c", &held, &sent)(0));
        queue.push(probes("c", &held, &sent)(1));
        assert_eq!(waiting(&queue).queued, MOST_WAITING);
        assert_eq!(waiting(&queue).keys["c"], 0);
        held.add_permits(Semaphore::MAX_PERMITS);
        for _ in 0..1_000 {
            if waiting(&queue).keys.is_empty() {
                break;
            }
            settle().await;
        }
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), MOST_WAITING + KEYS.len() + 1);
        assert!(!sent.contains(&("c", 1)));
        assert_eq!(waiting(&queue).queued, 0);
    }

    #[tokio::test]
    async fn keys_do_not_wait_for_each_other() {
        let queue = RefundQueue::default();
        let sent = Arc::default();
        let (held, open) = (
            Arc::new(Semaphore::new(0)),
            Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
        );
        queue.push(probes("a", &held, &sent)(0));
        queue.push(probes("b", &open, &sent)(0));
        queue.push(probes("b", &open, &sent)(1));
        settle().await;
        assert_eq!(*sent.lock().unwrap(), [("b", 0), ("b", 1)]);
        held.add_permits(1);
        settle().await;
        assert_eq!(sent.lock().unwrap().last(), Some(&("a", 0)));
    }

    #[test]
    fn a_chain_dropped_with_its_runtime_gives_up_its_key_and_its_count() {
        let queue = RefundQueue::default();
        let (held, sent) = (Arc::new(Semaphore::new(0)), Arc::default());
        let refund = probes("a", &held, &sent);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            for number in 0..3 {
                queue.push(refund(number));
            }
            settle().await;
        });
        assert_eq!(waiting(&queue).queued, 2);
        drop(runtime);
        assert!(waiting(&queue).keys.is_empty());
        assert_eq!(waiting(&queue).queued, 0);
        assert!(sent.lock().unwrap().is_empty());
    }

    #[test]
    fn a_chain_that_ended_leaves_its_key_to_the_next_one() {
        // Between a chain's removing its key and its claim's drop, another thread may start a
        // new chain of that key: the old claim must not take the key from it.
        let queue = RefundQueue::<Probe>::default();
        lock(&queue.waiting)
            .entry(0)
            .or_default()
            .keys
            .insert("a".to_owned(), VecDeque::new());
        let claim = |ended: bool| Chain::<Probe> {
            owner: (!ended).then_some(0),
            key: "a".to_owned(),
            waiting: Arc::clone(&queue.waiting),
        };
        drop(claim(true));
        assert!(waiting(&queue).keys.contains_key("a"));
        drop(claim(false));
        assert!(waiting(&queue).keys.is_empty());
        assert!(lock(&queue.waiting).is_empty());
    }

    /// Two limiters' refunds of one key are chains and bounds apart: one limiter's full queue
    /// for the key leaves the other's refunds of it sent at once.
    #[tokio::test]
    async fn each_owners_refunds_are_queued_apart() {
        let queue = RefundQueue::default();
        let (held, open) = (
            Arc::new(Semaphore::new(0)),
            Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
        );
        let sent = Arc::default();
        let refund = probes("a", &held, &sent);
        for number in 0..=MOST_WAITING_PER_KEY {
            queue.push(refund(number));
        }
        let other = probes("a", &open, &sent);
        for number in 0..2 {
            queue.push(Probe {
                owner: 1,
                ..other(number)
            });
        }
        settle().await;
        assert_eq!(*sent.lock().unwrap(), [("a", 0), ("a", 1)]);
        assert_eq!(waiting(&queue).keys["a"], MOST_WAITING_PER_KEY);
        assert!(!lock(&queue.waiting).contains_key(&1));
        held.add_permits(Semaphore::MAX_PERMITS);
    }

    #[test]
    fn outside_a_runtime_nothing_is_sent_or_kept() {
        let queue = RefundQueue::default();
        let (gate, sent) = (Arc::new(Semaphore::new(1)), Arc::default());
        queue.push(probes("a", &gate, &sent)(0));
        assert!(waiting(&queue).keys.is_empty());
        assert!(sent.lock().unwrap().is_empty());
    }
}
