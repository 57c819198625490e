//! The table events (keys inserted, idle keys reclaimed) a keyed table's slow path noted on
//! each thread, until the limiter that ran it takes them.

use std::cell::Cell;

thread_local! {
    /// The table events noted since the last [`take_events`].
    static EVENTS: Cell<TableEvents> = const { Cell::new(TableEvents::NONE) };
}

/// Keys inserted and idle keys reclaimed by a keyed table's slow path on this thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TableEvents {
    pub(crate) inserted: u64,
    pub(crate) reclaimed: u64,
}

impl TableEvents {
    const NONE: TableEvents = TableEvents {
        inserted: 0,
        reclaimed: 0,
    };
}

/// Notes `inserted` keys inserted and `reclaimed` idle keys forgotten, for the limiter whose
/// slow path this thread runs.
#[inline]
pub(crate) fn note(inserted: u64, reclaimed: u64) {
    EVENTS.with(|events| {
        let noted = events.get();
        events.set(TableEvents {
            inserted: noted.inserted.wrapping_add(inserted),
            reclaimed: noted.reclaimed.wrapping_add(reclaimed),
        });
    });
}

/// The events noted since the last call, cleared.
#[inline]
pub(super) fn take_events() -> TableEvents {
    EVENTS.with(|events| events.replace(TableEvents::NONE))
}
