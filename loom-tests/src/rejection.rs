//! What every broken twin's test asserts: the model panics, and on its invariant.

use std::panic::{self, AssertUnwindSafe};

/// Runs `model`, which must panic with a message that starts with `violation` (the invariant's
/// assertion), and returns that message.
///
/// # Panics
/// With "loom found no execution of `twin` breaking the invariant" when `model` returns, and
/// when it panics with another message (a twin must fail on what the model checks, not on
/// something else).
pub fn assert_violation(violation: &str, twin: &str, model: impl FnOnce()) -> String {
    // AssertUnwindSafe: nothing the closure touches is used after a panic.
    let Err(payload) = panic::catch_unwind(AssertUnwindSafe(model)) else {
        panic!("loom found no execution of {twin} breaking the invariant");
    };
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|text| (*text).to_owned()))
        .unwrap_or_else(|| "<non-string panic>".to_owned());
    assert!(
        message.starts_with(violation),
        "{twin} panicked, but not on the invariant: {message}"
    );
    message
}
