//! What this process holds of one key's lease, and how it reads the key's timeline.

/// How a process sizes its leases, and reads the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    /// The most units one lease holds.
    pub max_lease: u64,
    /// The span (µs) a lease is sized for: twice the units spent in the last such span.
    pub interval: u64,
    /// Whether a local reading maps onto the timeline 1/4096 of the time since the anchor
    /// ahead (the server's clock: a local clock up to 244 ppm slower than the server's still
    /// reads at or after the timeline). `false` on a client's clock, which is the timeline.
    pub margin: bool,
}

/// One key's lease, as this process holds it: plain integers, changed only under the key's
/// lock. A fresh key's (`Default`) holds nothing and knows nothing.
///
/// The bucket's lease is up to two ranges of emission slots: `[from, to)` spent first (`from`
/// is where the next unit's slot starts), then `[next_from, next_to)`; the window's is `left`
/// units counted in the window that ends at `to`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Whether a reply was installed (the anchor and `known` mean something).
    pub(crate) anchored: bool,
    /// Whether the key's sized ask is in flight (its install, or its end, clears it).
    pub(crate) asking: bool,
    /// The local time the anchor's request was sent, µs.
    pub(crate) anchor_local: u64,
    /// The time its script read, µs on the timeline.
    pub(crate) anchor_line: u64,
    /// The bucket: where the next unit's slot starts; unused by the window.
    pub(crate) from: u64,
    /// The bucket: the current range's end; the window: the end of the lease's window.
    pub(crate) to: u64,
    /// The bucket's second range (`next_to == 0`: none).
    pub(crate) next_from: u64,
    pub(crate) next_to: u64,
    /// The window's units left to spend.
    pub(crate) left: u64,
    /// What the last answers said of the whole quota, at least: the bucket's TAT, or the
    /// count of the window ending at `to` (this process's unspent units included).
    pub(crate) known: u64,
    /// The sliding window counter: the previous window's count, for the window ending at `to`.
    pub(crate) previous: u64,
    /// Units this process spent since `since` (its own requests that Redis admitted too).
    pub(crate) spent: u64,
    /// Start of the span `spent` counts, µs on the timeline.
    pub(crate) since: u64,
    /// Units spent per interval over the last whole span.
    pub(crate) pace: u64,
    /// The units of the last sized ask.
    pub(crate) want: u64,
    /// The units of the last lease installed (beyond the request that asked): the low-water
    /// mark is half of it.
    pub(crate) granted: u64,
}

impl Held {
    /// The timeline at local time `local`: the anchor's script time plus the local time since
    /// the anchor's request was sent (never earlier than the script's read, which came after
    /// the send), plus the margin; a reading before the anchor reads as the anchor.
    #[inline]
    pub(crate) fn line(&self, local: u64, sizing: &Sizing) -> u64 {
        let since = local.saturating_sub(self.anchor_local);
        let margin = if sizing.margin { since >> 12 } else { 0 };
        self.anchor_line.saturating_add(since).saturating_add(margin)
    }

    /// Takes the anchor of a reply whose request was sent at local time `sent`, its script
    /// having read `now`, unless a later-sent request's is held: every anchor reads at or
    /// after the timeline, and the latest drifts least.
    pub(crate) fn anchor(&mut self, sent: u64, now: u64) {
        if !self.anchored || sent >= self.anchor_local {
            self.anchor_local = sent;
            self.anchor_line = now;
        }
        self.anchored = true;
    }

    /// The units spent per interval at `now`: over the span since `since`, counted as at
    /// least an eighth of an interval (two requests a microsecond apart are no rate); within
    /// an interval of `since`, at least the pace of the last whole span.
    fn pace(&self, sizing: &Sizing, now: u64) -> u64 {
        let elapsed = now.saturating_sub(self.since);
        let span = elapsed.max(sizing.interval / 8).max(1);
        // Below 2^64: `spent` and the interval are far below 2^63 (units, µs), and the
        // quotient is at most `spent * 8`.
        let current = (u128::from(self.spent) * u128::from(sizing.interval)).div_ceil(u128::from(span));
        let current = u64::try_from(current).unwrap_or(u64::MAX);
        if elapsed >= sizing.interval {
            current
        } else {
            current.max(self.pace)
        }
    }

    /// The units the next sized ask wants at `now` for a request of weight `cost`: the
    /// request's weight for a key never answered; else twice the units spent per interval
    /// ([`pace`](Self::pace)), or `floor` if more (the rule's share of the quota left free,
    /// [`LeaseRule`](super::LeaseRule)'s `floor`). At least `cost` (and 1), at most `max_lease`
    /// (or `cost`).
    pub(crate) fn next_want(&self, sizing: &Sizing, now: u64, cost: u64, floor: u64) -> u64 {
        if !self.anchored {
            return cost;
        }
        let want = self.pace(sizing, now).saturating_mul(2).max(floor);
        want.min(sizing.max_lease).max(cost).max(1)
    }

    /// Makes a sized ask at `now` for a request of weight `cost`, with the rule's `floor`: the
    /// units it wants. Once an interval has passed since `since`, its pace is kept and a new
    /// span starts.
    pub(crate) fn ask(&mut self, sizing: &Sizing, now: u64, cost: u64, floor: u64) -> u64 {
        let want = self.next_want(sizing, now, cost, floor);
        if now.saturating_sub(self.since) >= sizing.interval {
            self.pace = self.pace(sizing, now);
            self.spent = 0;
            self.since = now;
        }
        self.want = want;
        self.asking = true;
        want
    }
}
