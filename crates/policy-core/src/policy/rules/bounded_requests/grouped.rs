//! R2's messages about one GPU resource or HAMi share, grouped: one per resource and
//! problem, naming every container that has it.

use std::collections::BTreeMap;

use crate::policy::container::{Container, GpuResource};
use crate::policy::message::{CONTAINER, MessageTemplate};
use crate::policy::pod::PodView;

/// One kind of problem with one resource (a GPU resource, or a HAMi share);
/// containers sharing it are named in one message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Problem {
    Invalid {
        field: &'static str,
        reason: String,
    },
    RequestWithoutLimit,
    RequestNotLimit,
    /// Above a bound: `value` fills the template's `{slot}`.
    Above {
        field: &'static str,
        slot: &'static str,
        value: u64,
    },
}

/// The messages of what `problems_of` finds in the `resources` of each container: one per resource
/// and problem, in that order, naming its containers. `templates`: of an invalid value, of a
/// request without a limit, of one that differs from its limit, of one above a bound.
pub(super) fn grouped<'v>(
    view: &PodView<'v>,
    resources: for<'c> fn(&'c Container<'v>) -> &'c [GpuResource<'v>],
    problems_of: &dyn Fn(&GpuResource<'v>) -> Vec<Problem>,
    [invalid, without_limit, not_limit, above]: [MessageTemplate; 4],
) -> Vec<String> {
    let mut problems: BTreeMap<(&str, Problem), Vec<&str>> = BTreeMap::new();
    for container in &view.containers {
        for resource in resources(container) {
            for problem in problems_of(resource) {
                problems.entry((resource.name, problem)).or_default().push(container.name);
            }
        }
    }
    let messages = problems.into_iter().map(|((resource, problem), names)| {
        let (template, field, (slot, value)) = match problem {
            Problem::Invalid { field, reason } => (invalid, field, ("reason", reason)),
            Problem::RequestWithoutLimit => (without_limit, "", ("", String::new())),
            Problem::RequestNotLimit => (not_limit, "", ("", String::new())),
            Problem::Above { field, slot, value } => (above, field, (slot, value.to_string())),
        };
        template.format(&[
            ("containers", &CONTAINER.list(names)),
            ("field", &field),
            ("resource", &resource),
            (slot, &value),
        ])
    });
    messages.collect()
}
