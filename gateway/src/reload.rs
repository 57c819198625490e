//! Reloading the configuration file on SIGHUP and when it changes, without dropping a
//! connection: a new routing table is built beside the running one (keeping the limiter of
//! every route whose policy is unchanged) and swapped in whole; a file that does not read
//! keeps the running table, and says why.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use tokio::signal::unix::{signal, SignalKind};

use crate::file;
use crate::flags::Flags;
use crate::held::Continuity;
use crate::metrics;
use crate::redis::{self, Checked};
use crate::routing::Table;
use crate::words::{fields_words, route_words, store_words};

/// How often the file is looked at for a change: its modification time and size, then, when
/// either moved, its content (an editor that saves the same text reloads nothing). Polling,
/// not the `notify` crate: one `stat` a second costs nothing, sees an editor's save whether it
/// writes in place or renames a new file over the old (which a watch on the file itself
/// loses), and needs no dependency; SIGHUP reloads at once whatever the file's times say.
const POLL: Duration = Duration::from_secs(1);

/// What the poll compares: the file's modification time and size.
type Stamp = Option<(SystemTime, u64)>;

async fn stamp(path: &Path) -> Stamp {
    let metadata = tokio::fs::metadata(path).await.ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// What set a reload off.
#[derive(Clone, Copy, Debug)]
enum Trigger {
    Hangup,
    Changed,
}

/// Watches for SIGHUP and for changes of the file at `path` (whose text the running table was
/// built from is `loaded`), and reloads.
pub(crate) fn watch(
    path: PathBuf,
    loaded: String,
    flags: Flags,
    table: Arc<ArcSwap<Table>>,
) -> Result<(), String> {
    let mut hangups = signal(SignalKind::hangup()).map_err(|e| format!("SIGHUP: {e}"))?;
    tokio::spawn(async move {
        // The text last read, applied or not: a broken file is reported once, not every second.
        let mut seen = loaded.into_bytes();
        let mut stamped = stamp(&path).await;
        let mut poll = tokio::time::interval(POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let trigger = tokio::select! {
                _ = hangups.recv() => Trigger::Hangup,
                _ = poll.tick() => {
                    let now = stamp(&path).await;
                    if now == stamped {
                        continue;
                    }
                    // Unreadable for now (mid-rename): looked at again next time.
                    let Ok(text) = tokio::fs::read(&path).await else { continue };
                    stamped = now;
                    if text == seen {
                        continue;
                    }
                    Trigger::Changed
                }
            };
            if let Some(text) = reload(trigger, &path, &flags, &table).await {
                seen = text.into_bytes();
            }
        }
    });
    Ok(())
}

/// Reads the file and swaps in the table it describes, or keeps the running one; one line
/// either way. Returns the text read, if the file could be read.
async fn reload(
    trigger: Trigger,
    path: &std::path::Path,
    flags: &Flags,
    table: &ArcSwap<Table>,
) -> Option<String> {
    let why = match trigger {
        Trigger::Hangup => "SIGHUP",
        Trigger::Changed => "file changed",
    };
    let running = table.load_full();
    let (next, text) = match file::read(path, flags) {
        Ok((mut settings, text)) => {
            let mut notes = Vec::new();
            if settings.listen != running.settings.listen {
                notes.push(format!(
                    "listen {} -> {}: takes effect at the next start",
                    running.settings.listen, settings.listen
                ));
                settings.listen = running.settings.listen;
            }
            if settings.metrics != running.settings.metrics {
                notes.push("metrics address changed: takes effect at the next start".to_owned());
                settings.metrics = running.settings.metrics;
            }
            let next = match Table::build(settings, Some(&running)).await {
                Ok(next) => redis::check(&next, Checked::New).await.map(|()| next),
                Err(error) => Err(error),
            };
            (next.map(|next| (next, notes)), Some(text))
        }
        Err(error) => (Err(error), std::fs::read_to_string(path).ok()),
    };
    match next {
        Ok((mut next, notes)) => {
            let mut summary = changes(&running, &next);
            summary.extend(notes);
            summary.extend(next.apply_quota_changes());
            if summary.is_empty() {
                summary.push("nothing changed".to_owned());
            }
            running.clear_gone_keys(&next);
            table.store(Arc::new(next));
            metrics::count_reload(true);
            println!("reload ({why}): {}", summary.join("; "));
        }
        Err(error) => {
            metrics::count_reload(false);
            eprintln!("reload ({why}) failed, the running configuration stays: {error}");
        }
    }
    text
}

/// What became of one limiter (`policy NAME: ` first for one of several).
fn continuity_words((policy, continuity): &(Option<String>, Continuity)) -> String {
    let what = match continuity {
        Continuity::New => "new counters".to_owned(),
        Continuity::Kept => "counters kept".to_owned(),
        Continuity::Retuned => "quota changed live, counters kept".to_owned(),
        Continuity::Rebuilt(why) => format!("rebuilt ({why}), new counters"),
    };
    match policy {
        Some(name) => format!("policy {name}: {what}"),
        None => what,
    }
}

/// What changed from `old` to `new`, in words.
fn changes(old: &Table, new: &Table) -> Vec<String> {
    let mut said = Vec::new();
    for route in &new.routes {
        let name = &route.settings.name;
        let now = route_words(&route.settings);
        match old.route(name) {
            None => said.push(format!("route {name} added: {now}")),
            Some(before) => {
                let then = route_words(&before.settings);
                let kept = |(_, continuity): &(Option<String>, Continuity)| *continuity == Continuity::Kept;
                if then == now && route.continuity.iter().all(kept) {
                    said.push(format!("route {name} unchanged"));
                } else {
                    let each: Vec<String> = route.continuity.iter().map(continuity_words).collect();
                    said.push(format!("route {name}: {then} -> {now} ({})", each.join("; ")));
                }
            }
        }
    }
    for route in &old.routes {
        if new.route(&route.settings.name).is_none() {
            said.push(format!("route {} removed", route.settings.name));
        }
    }
    let (old_settings, new_settings) = (&old.settings, &new.settings);
    if old_settings.upstream != new_settings.upstream {
        let shown = |upstream: &Option<http::Uri>| {
            upstream
                .as_ref()
                .map_or("built-in hello".to_owned(), ToString::to_string)
        };
        said.push(format!(
            "upstream {} -> {}",
            shown(&old_settings.upstream),
            shown(&new_settings.upstream)
        ));
    }
    if let (Some(before), Some(after)) = (&old_settings.limits, &new_settings.limits) {
        if before.store != after.store {
            said.push(store_words(&after.store));
        }
        if before.fields != after.fields {
            said.push(fields_words(after.fields));
        }
    }
    said
}
