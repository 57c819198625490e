//! loom models live in `tests/`; see README.
