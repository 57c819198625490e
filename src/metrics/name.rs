//! A limiter's name, the `limiter` label of its series: checked once, when it is made.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The longest name, in bytes: a label value that fits a dashboard's legend.
pub const MAX_NAME_BYTES: usize = 128;

/// The name a limiter's series carry as their `limiter` label: 1 to [`MAX_NAME_BYTES`] bytes,
/// no control characters (a label value is shown on one line, in a dashboard, a log or the
/// Prometheus text format).
///
/// ```
/// use tollgate::metrics::{LimiterName, LimiterNameError};
///
/// let name: LimiterName = "api".parse()?;
/// assert_eq!(name.as_str(), "api");
/// assert_eq!("".parse::<LimiterName>(), Err(LimiterNameError::Empty));
/// # Ok::<(), LimiterNameError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LimiterName(Arc<str>);

impl LimiterName {
    /// `name`, if it is one.
    ///
    /// # Errors
    /// [`LimiterNameError`] says what is wrong with it.
    pub fn new(name: &str) -> Result<LimiterName, LimiterNameError> {
        if name.is_empty() {
            return Err(LimiterNameError::Empty);
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(LimiterNameError::TooLong { bytes: name.len() });
        }
        if let Some(at) = name.find(char::is_control) {
            return Err(LimiterNameError::ControlCharacter { at });
        }
        Ok(LimiterName(Arc::from(name)))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for LimiterName {
    type Err = LimiterNameError;

    fn from_str(name: &str) -> Result<LimiterName, LimiterNameError> {
        LimiterName::new(name)
    }
}

impl TryFrom<&str> for LimiterName {
    type Error = LimiterNameError;

    fn try_from(name: &str) -> Result<LimiterName, LimiterNameError> {
        LimiterName::new(name)
    }
}

impl AsRef<str> for LimiterName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LimiterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LimiterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// A string that cannot be a [`LimiterName`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimiterNameError {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_NAME_BYTES`].
    TooLong {
        /// Its length, in bytes.
        bytes: usize,
    },
    /// The name holds a control character (a line break, a tab...).
    ControlCharacter {
        /// The byte offset of the first one.
        at: usize,
    },
}

impl fmt::Display for LimiterNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimiterNameError::Empty => f.write_str(
                "a limiter's name is empty: give it 1 to 128 bytes of text, such as `api` (a limiter without a name records nothing)",
            ),
            LimiterNameError::TooLong { bytes } => write!(
                f,
                "a limiter's name is {bytes} bytes long: it may be at most {MAX_NAME_BYTES}"
            ),
            LimiterNameError::ControlCharacter { at } => write!(
                f,
                "a limiter's name holds a control character at byte {at}: use printable text on one line"
            ),
        }
    }
}

impl std::error::Error for LimiterNameError {}
