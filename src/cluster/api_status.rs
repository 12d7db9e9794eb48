//! What an API server's error answer says, where 403 and 404 are states
//! (a kind not served, a read RBAC does not grant) rather than failures.

/// The API server does not serve the resource asked for, or has no such
/// object (404).
pub(super) fn is_not_served(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

pub(super) fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 403)
}

/// A 403 as no object.
pub(super) fn unless_forbidden<T>(
    got: Result<Option<T>, kube::Error>,
) -> Result<Option<T>, kube::Error> {
    match got {
        Err(error) if is_forbidden(&error) => Ok(None),
        got => got,
    }
}
