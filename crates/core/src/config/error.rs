//! The one error type of configuration loading.
//!
//! Every variant names where the problem is: a file and its line and
//! column, or the `--set` argument responsible, then the key path and what
//! was expected. It knows nothing of what the keys mean.

use std::path::PathBuf;

use super::Origin;

/// A configuration that could not be read, parsed or accepted.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file as given.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The text is not valid YAML (or uses YAML features not accepted here).
    #[error("{origin}: {message}")]
    Syntax {
        /// Where the problem is.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
    /// Valid YAML that is not a valid configuration: an unknown key, a
    /// wrong type or unit, or a value that breaks a rule of the machine.
    #[error("{origin}: {path}: {message}")]
    Invalid {
        /// Where the offending key was written (file position or `--set`).
        origin: Origin,
        /// The key path, e.g. `system.sips.w`.
        path: String,
        /// What was expected.
        message: String,
    },
    /// A `--set` argument that is not `key.path=value` or cannot be applied.
    #[error("--set {arg}: {message}")]
    Override {
        /// The argument as given.
        arg: String,
        /// What is wrong.
        message: String,
    },
}
