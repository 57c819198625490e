//! The operator's full-table policy: `--when-full refuse` answers a new key 503 while the table
//! is full of keys still being limited; `--when-full admit` forwards it, unlimited.

mod common;

use common::Gateway;

/// The statuses of one request for each of `keys` new API keys, then of two more requests of
/// the last key.
fn statuses(gateway: &Gateway, keys: usize) -> Vec<u16> {
    let mut statuses: Vec<u16> = (0..keys)
        .map(|n| gateway.get("/", &[("x-api-key", &format!("client-{n}"))]).status)
        .collect();
    let last = format!("client-{}", keys - 1);
    statuses.extend((0..2).map(|_| gateway.get("/", &[("x-api-key", &last)]).status));
    statuses
}

/// A table for one key (it holds a few more: slots come in groups), each key limited to one
/// request a minute, so that every key stays in it for the whole test.
const TINY_TABLE: [&str; 6] = ["--key", "header:x-api-key", "--capacity", "1", "--quota", "1/min"];

#[test]
fn refuse_answers_new_keys_503_while_the_table_is_full() {
    let gateway = Gateway::start(&[&TINY_TABLE[..], &["--when-full", "refuse"]].concat());
    let statuses = statuses(&gateway, 16);
    assert_eq!(statuses[0], 200, "{statuses:?}");
    assert!(
        statuses.iter().all(|&status| status == 200 || status == 503),
        "{statuses:?}"
    );
    // The last key found no room: refused each time, never over its quota.
    assert_eq!(statuses[15..], [503, 503, 503], "{statuses:?}");
}

#[test]
fn admit_forwards_new_keys_unlimited_while_the_table_is_full() {
    let gateway = Gateway::start(&[&TINY_TABLE[..], &["--when-full", "admit"]].concat());
    let statuses = statuses(&gateway, 16);
    // Every key is served; the last, untracked, three times on a quota of one a minute.
    assert_eq!(statuses, [200; 18], "{statuses:?}");
    assert!(gateway
        .banner_line("keys: ")
        .is_some_and(|line| line.ends_with("a new key is admitted, uncounted")));
}
