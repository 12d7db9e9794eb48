//! Object names as the API server allows them, checked before a name taken
//! from a review goes into a request's path. A review may be forged, and
//! kube puts a name into the path as it is: a `/` or a `..` in it would
//! make the request ask for another resource. A name no object can have is
//! answered as "no such object" without a request.

/// The longest DNS-1123 label (a namespace's name).
const MAX_LABEL: usize = 63;
/// The longest DNS-1123 subdomain (a pod's name).
const MAX_SUBDOMAIN: usize = 253;

/// A DNS-1123 label, as a namespace's name is: 1 to 63 of `a-z`, `0-9`
/// and `-`, beginning and ending with a letter or a digit.
pub fn is_dns_label(name: &str) -> bool {
    name.len() <= MAX_LABEL && is_label_part(name)
}

/// A DNS-1123 subdomain, as a pod's name is: at most 253 characters,
/// labels joined by dots.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= MAX_SUBDOMAIN && name.split('.').all(is_label_part)
}

fn is_label_part(part: &str) -> bool {
    let alphanumeric = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (part.as_bytes().first(), part.as_bytes().last()) {
        (Some(&first), Some(&last)) => {
            alphanumeric(first)
                && alphanumeric(last)
                && part.bytes().all(|c| alphanumeric(c) || c == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
