//! Why a configuration file is refused.

/// Why a configuration could not be read, parsed or accepted.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config: {0}")]
    Invalid(String),
}
