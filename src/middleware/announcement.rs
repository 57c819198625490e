//! What a layer announces: the fields of every policy its limiter lists
//! ([`RateLimiter::policies`]), built with the layer, and built again when the limiter says its
//! policies changed ([`RateLimiter::policy_changes`]: a quota changed live).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use http::HeaderValue;

use super::fields::{quote_policy_name, Fields, QuotedName};
use super::limiter::{NamedPolicy, RateLimiter};

/// The fields of every policy a limiter lists, as of `changes`.
#[derive(Debug)]
pub(crate) struct Announced {
    /// The limiter's [`policy_changes`](RateLimiter::policy_changes) they were built at.
    changes: u64,
    /// One per listed policy, in order.
    fields: Box<[Fields]>,
    /// What a decision reported by no listed policy writes: the list alone.
    silent: Fields,
}

impl Announced {
    /// The fields of the policy `reporting` names (its index in the list); the list alone when
    /// none.
    pub(crate) fn of(&self, reporting: Option<usize>) -> &Fields {
        reporting
            .and_then(|index| self.fields.get(index))
            .unwrap_or(&self.silent)
    }
}

/// A layer's announcement: the names and switches it was configured with, the fields built
/// with it, and the ones built after a live change.
pub(crate) struct Announcement {
    /// The layer's name, for a policy its limiter does not name.
    name: QuotedName,
    on_admitted: bool,
    legacy: bool,
    built: Announced,
    /// Built after the limiter's policies changed (none before): read while they stay the same.
    current: ArcSwapOption<Announced>,
}

/// The fields in force for one request: the ones built with the layer, or later ones.
pub(crate) enum Loaded<'a> {
    Built(&'a Announced),
    Changed(Arc<Announced>),
}

impl Deref for Loaded<'_> {
    type Target = Announced;

    fn deref(&self) -> &Announced {
        match self {
            Loaded::Built(built) => built,
            Loaded::Changed(current) => current,
        }
    }
}

impl Announcement {
    /// `limiter`'s policies, an unnamed one under `name`.
    pub(crate) fn new<K, L: RateLimiter<K>>(limiter: &L, name: QuotedName) -> Announcement {
        let built = build(&name, limiter.policies(), false, false, limiter.policy_changes());
        Announcement {
            name,
            on_admitted: false,
            legacy: false,
            built,
            current: ArcSwapOption::empty(),
        }
    }

    /// The same, with `name` for an unnamed policy and the two switches.
    pub(crate) fn configured<K, L: RateLimiter<K>>(
        &self,
        limiter: &L,
        name: QuotedName,
        on_admitted: bool,
        legacy: bool,
    ) -> Announcement {
        Announcement {
            built: build(
                &name,
                limiter.policies(),
                on_admitted,
                legacy,
                limiter.policy_changes(),
            ),
            name,
            on_admitted,
            legacy,
            current: ArcSwapOption::empty(),
        }
    }

    pub(crate) fn name(&self) -> &QuotedName {
        &self.name
    }

    pub(crate) fn on_admitted(&self) -> bool {
        self.on_admitted
    }

    pub(crate) fn legacy(&self) -> bool {
        self.legacy
    }

    /// The fields in force: the ones built with the layer while the limiter's policies have
    /// not changed since (for a limiter whose `policy_changes` is the provided 0, this is all
    /// the request pays), else the ones built after the latest change, built now if none is.
    #[inline]
    pub(crate) fn load<K, L: RateLimiter<K>>(&self, limiter: &L) -> Loaded<'_> {
        let changes = limiter.policy_changes();
        if changes == self.built.changes {
            return Loaded::Built(&self.built);
        }
        if let Some(current) = self
            .current
            .load_full()
            .filter(|current| current.changes == changes)
        {
            return Loaded::Changed(current);
        }
        let rebuilt = Arc::new(build(
            &self.name,
            limiter.policies(),
            self.on_admitted,
            self.legacy,
            changes,
        ));
        self.current.store(Some(Arc::clone(&rebuilt)));
        Loaded::Changed(rebuilt)
    }
}

/// The fields of `policies`, an unnamed one under `name`.
fn build(
    name: &QuotedName,
    policies: Vec<NamedPolicy>,
    on_admitted: bool,
    legacy: bool,
    changes: u64,
) -> Announced {
    let listed = policies
        .into_iter()
        .map(|named| {
            // A name that cannot be written (never from a `PolicySet`, which checks them) is
            // announced under the layer's.
            let quoted = named.name.and_then(|given| quote_policy_name(&given).ok());
            (quoted.unwrap_or_else(|| name.clone()), named.policy)
        })
        .collect();
    let mut fields = Fields::listed(listed);
    for each in &mut fields {
        each.on_admitted = on_admitted;
        each.legacy = legacy;
    }
    let list = fields.first().map_or_else(
        || HeaderValue::from_static(""),
        |first| first.policy_value().clone(),
    );
    let mut silent = Fields::silent(list);
    silent.on_admitted = on_admitted;
    Announced {
        changes,
        fields: fields.into_boxed_slice(),
        silent,
    }
}

impl fmt::Debug for Announcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Announcement")
            .field("built", &self.built)
            .field("on_admitted", &self.on_admitted)
            .field("legacy", &self.legacy)
            .finish_non_exhaustive()
    }
}
