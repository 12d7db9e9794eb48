//! Reading test certificates: their subject alternative names.

use std::net::IpAddr;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// Runs `read` on the first certificate of `cert_pem`.
pub fn with_certificate<T>(cert_pem: &[u8], read: impl FnOnce(&X509Certificate<'_>) -> T) -> T {
    let der = CertificateDer::from_pem_slice(cert_pem).expect("pem");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("x509");
    read(&cert)
}

/// The DNS and IPv4 subject alternative names of a certificate.
pub fn sans(cert: &X509Certificate<'_>) -> (Vec<String>, Vec<IpAddr>) {
    let san = cert.subject_alternative_name().expect("san ext").expect("san present");
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    for name in &san.value.general_names {
        match name {
            GeneralName::DNSName(name) => dns.push((*name).to_owned()),
            GeneralName::IPAddress(bytes) => {
                let octets: [u8; 4] = (*bytes).try_into().expect("ipv4");
                ips.push(IpAddr::from(octets));
            }
            other => panic!("unexpected SAN {other:?}"),
        }
    }
    (dns, ips)
}
