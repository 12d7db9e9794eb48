use super::credentials::CredentialsError;
use super::dns::DnsSetupError;

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("imageResolution.credentialsFile: {0}")]
    Credentials(#[from] CredentialsError),
    #[error("image registry client: {0}")]
    Client(String),
    #[error("image registry client: {0}")]
    Dns(#[from] DnsSetupError),
    #[error("{0}")]
    Hosts(String),
}
