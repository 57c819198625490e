//! Refunds through Redis: a bucket's units admitted and never used (a shaped request abandoned
//! before its slot) given back to the whole fleet, with the local limiters' semantics.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::algorithm::GCRA_REFUND;
use super::breakers::Breakers;
use super::classify::classify;
use super::connection::Connection;
use super::error::RedisCheckError;

/// One refund, prepared: it owns everything its round trip needs (a handle on the shared
/// connection and breakers, the key, the packed arguments), so that it can run on a task of its
/// own: the tower layer's refunds, started from a destructor, wait in its queue.
pub(crate) struct Refund {
    pub(crate) connection: Connection,
    pub(crate) breakers: Arc<Breakers>,
    pub(crate) key: String,
    pub(crate) arguments: ([u8; 56], usize),
    /// The end of the slot given back, as `gcra_refund.lua`'s `ARGV[2]` and how many of its
    /// bytes to send (8: µs; 16 for a bucket whose interval is not whole µs: µs, then the
    /// nanoseconds after them): the TAT moves back only if it still equals it. `None`:
    /// unconditionally (`RedisLimiter::refund_n`).
    pub(crate) slot_end: Option<([u8; 16], usize)>,
    pub(crate) deadline: Duration,
}

impl Refund {
    /// One `EVALSHA` of `gcra_refund.lua`: whether the key's TAT moved back (with a slot's end,
    /// only if the TAT still equals it).
    ///
    /// Best effort: when Redis does not answer within the deadline, fails, or was found down
    /// less than a probe interval ago (the breaker is open), nothing is given back (`false`).
    /// A refund asks the breaker as a decision does, and an answer closes it; a refund's
    /// failure does not open it: the layer's refunds have nobody to tell, and the next decision,
    /// which waits on Redis anyway, finds out by itself (a refund that took the probe and failed
    /// leaves the breaker open for another pause, as any failed probe).
    pub(crate) async fn run(self) -> Result<bool, RedisCheckError> {
        let breaker = self.breakers.of(&self.key);
        if breaker.should_ask().is_err() {
            return Ok(false);
        }
        let (arguments, length) = self.arguments;
        let end = self.slot_end;
        let args: [&[u8]; 2] = [
            &arguments[..length],
            end.as_ref().map_or(&[][..], |(end, length)| &end[..*length]),
        ];
        let args = &args[..if end.is_some() { 2 } else { 1 }];
        let keys = [self.key.as_str()];
        let answer =
            tokio::time::timeout(self.deadline, self.connection.run(&GCRA_REFUND, &keys, args)).await;
        match answer {
            Ok(Ok(reply)) => {
                breaker.succeeded();
                Ok(matches!(reply, Value::Int(1)))
            }
            Ok(Err(error)) => match classify(&error, self.key.clone(), None, self.connection.is_cluster()) {
                Err(about_the_key) => {
                    // Redis answered (about the key's content): it is up.
                    breaker.succeeded();
                    Err(about_the_key)
                }
                Ok(_failure) => Ok(false),
            },
            Err(_elapsed) => Ok(false),
        }
    }
}
