//! A key's `Display` text, written into a buffer on the stack: the tower layer's keys (an IP
//! address, a header value) are hashed without an allocation per decision.

use std::fmt::{self, Display, Write};

/// Keys up to this many bytes stay on the stack; longer ones are written to a `String`.
const INLINE: usize = 96;

/// The text of a key.
pub(super) enum KeyBytes {
    Inline { bytes: [u8; INLINE], len: usize },
    Heap(String),
}

/// Writes into the inline buffer until it is full.
struct Inline<'a> {
    bytes: &'a mut [u8; INLINE],
    len: usize,
}

impl Write for Inline<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let end = self
            .len
            .checked_add(text.len())
            .filter(|&end| end <= INLINE)
            .ok_or(fmt::Error)?;
        self.bytes[self.len..end].copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl KeyBytes {
    pub(super) fn of(key: &impl Display) -> KeyBytes {
        let mut bytes = [0; INLINE];
        let mut inline = Inline {
            bytes: &mut bytes,
            len: 0,
        };
        if write!(inline, "{key}").is_ok() {
            let len = inline.len;
            return KeyBytes::Inline { bytes, len };
        }
        KeyBytes::Heap(key.to_string())
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            KeyBytes::Inline { bytes, len } => &bytes[..*len],
            KeyBytes::Heap(text) => text.as_bytes(),
        }
    }

    /// The text (only whole `str` writes went in).
    pub(super) fn as_str(&self) -> &str {
        match self {
            KeyBytes::Inline { bytes, len } => std::str::from_utf8(&bytes[..*len]).unwrap_or_default(),
            KeyBytes::Heap(text) => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KeyBytes;

    #[test]
    fn a_key_is_its_display_text_inline_or_not() {
        let address: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        let short = KeyBytes::of(&address);
        assert!(matches!(short, KeyBytes::Inline { .. }));
        assert_eq!(short.as_str(), "192.0.2.7");
        let long = "k".repeat(200);
        let written = KeyBytes::of(&long);
        assert!(matches!(written, KeyBytes::Heap(_)));
        assert_eq!(written.as_bytes(), long.as_bytes());
    }
}
