//! The namespace guard: the `gpu-policy.io/mode` label is itself policy.
//!
//! Reads: the label on the old and new Namespace; the requesting user and
//! groups; the configured `policyAdmins`.
//!
//! Denies loosening the mode (enforce -> warn -> audit -> absent) unless the
//! user or one of their groups is a policy admin, and denies a value that is
//! not a mode (it would silently switch the policy off). Tightening is open
//! to anyone, as is deleting the namespace.

use serde_json::Value;

use super::Mode;
use crate::settings::MODE_LABEL;

/// How strict a label value is: higher is stricter. An absent or unknown
/// value admits everything.
fn strictness(mode: Option<Mode>) -> u8 {
    match mode {
        Some(Mode::Enforce) => 3,
        Some(Mode::Warn) => 2,
        Some(Mode::Audit) => 1,
        None => 0,
    }
}

fn label(namespace: Option<&Value>) -> Option<&str> {
    namespace?
        .pointer("/metadata/labels")?
        .get(MODE_LABEL)?
        .as_str()
}

fn describe(value: Option<&str>) -> String {
    value.map_or_else(|| "absent".to_owned(), |v| format!("{v:?}"))
}

/// Who is asking.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub username: &'a str,
    pub groups: &'a [String],
}

/// `Err` carries the denial message.
pub fn check(
    old: Option<&Value>,
    new: Option<&Value>,
    requester: Requester<'_>,
    policy_admins: &[String],
) -> Result<(), String> {
    let Some(new) = new else {
        // DELETE: removing the namespace removes its pods too.
        return Ok(());
    };
    let (before, after) = (label(old), label(Some(new)));
    let after_mode = match after {
        None => None,
        Some(value) => match value.parse::<Mode>() {
            Ok(mode) => Some(mode),
            Err(_) => {
                return Err(format!(
                    "gpu-policy: label {MODE_LABEL}={value:?} is not a mode; use enforce, warn or audit"
                ));
            }
        },
    };
    let before_mode = before.and_then(|value| value.parse::<Mode>().ok());
    if strictness(after_mode) >= strictness(before_mode) {
        return Ok(());
    }
    let is_admin = policy_admins
        .iter()
        .any(|admin| admin == requester.username || requester.groups.contains(admin));
    if is_admin {
        return Ok(());
    }
    Err(format!(
        "gpu-policy: changing {MODE_LABEL} from {} to {} loosens GPU policy; only members of {} may",
        describe(before),
        describe(after),
        policy_admins.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn namespace(mode: Option<&str>) -> Value {
        match mode {
            Some(mode) => {
                json!({"metadata": {"name": "ml", "labels": {MODE_LABEL: mode, "team": "a"}}})
            }
            None => json!({"metadata": {"name": "ml", "labels": {"team": "a"}}}),
        }
    }

    fn run(old: Option<&str>, new: Option<&str>, groups: &[&str]) -> Result<(), String> {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        let requester = Requester {
            username: "alice",
            groups: &groups,
        };
        let (old, new) = (namespace(old), namespace(new));
        check(
            Some(&old),
            Some(&new),
            requester,
            &["system:masters".to_owned()],
        )
    }

    #[rstest]
    // tightening and keeping: anyone
    #[case(None, Some("audit"), true)]
    #[case(None, Some("enforce"), true)]
    #[case(Some("audit"), Some("warn"), true)]
    #[case(Some("warn"), Some("enforce"), true)]
    #[case(Some("enforce"), Some("enforce"), true)]
    #[case(None, None, true)]
    // loosening: denied
    #[case(Some("enforce"), Some("warn"), false)]
    #[case(Some("enforce"), Some("audit"), false)]
    #[case(Some("warn"), Some("audit"), false)]
    #[case(Some("enforce"), None, false)]
    #[case(Some("audit"), None, false)]
    // a value that is not a mode: denied
    #[case(None, Some("enforcing"), false)]
    #[case(Some("enforce"), Some("Enforce"), false)]
    // an unknown old value counts as absent
    #[case(Some("bogus"), Some("audit"), true)]
    fn ordinary_users(#[case] old: Option<&str>, #[case] new: Option<&str>, #[case] allowed: bool) {
        assert_eq!(run(old, new, &["system:authenticated"]).is_ok(), allowed);
    }

    #[test]
    fn admins_may_loosen() {
        assert!(run(Some("enforce"), None, &["system:masters"]).is_ok());
        let requester = Requester {
            username: "root-admin",
            groups: &[],
        };
        let (old, new) = (namespace(Some("enforce")), namespace(Some("audit")));
        assert!(
            check(
                Some(&old),
                Some(&new),
                requester,
                &["root-admin".to_owned()]
            )
            .is_ok()
        );
    }

    #[test]
    fn denial_names_the_change_and_who_may() {
        assert_eq!(
            run(Some("enforce"), Some("warn"), &[]),
            Err("gpu-policy: changing gpu-policy.io/mode from \"enforce\" to \"warn\" loosens GPU policy; only members of system:masters may".to_owned())
        );
    }

    #[test]
    fn deleting_a_namespace_is_allowed() {
        let old = namespace(Some("enforce"));
        let requester = Requester {
            username: "alice",
            groups: &[],
        };
        assert!(check(Some(&old), None, requester, &[]).is_ok());
    }
}
