//! Writing policy reports into the cluster (`audit --write-reports`,
//! `doctor --write-report`): docs/operations.md, "Writing them:
//! `--write-reports`".

use std::collections::BTreeSet;
use std::fmt;

use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};

use super::api_status::is_not_served;
use crate::reports::{
    FIELD_MANAGER, MANAGED_BY, MANAGED_BY_LABEL, REPORT_NAME, Report, ReportApi, ReportScope,
    Summary,
};

/// Each says it on one line.
#[derive(Debug, thiserror::Error)]
pub enum ReportsError {
    #[error(
        "the cluster serves neither {} Reports nor {} PolicyReports: install the CRDs of one",
        ReportApi::OpenReports.api_version(),
        ReportApi::PolicyReport.api_version()
    )]
    NeitherServed,
    #[error("the cluster does not serve {api_version} {kind}s: install its CRDs")]
    NotServed { api_version: String, kind: &'static str },
    #[error("cannot {action} {kind} {name}: {source}")]
    Api {
        action: &'static str,
        kind: &'static str,
        /// `namespace/name`, `name`, or what was listed.
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot encode {kind} {name}: {source}")]
    Encode {
        kind: &'static str,
        name: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Which of the reports `audit` wrote before may be deleted (those named
/// [`REPORT_NAME`]; `doctor`'s has a name of its own and is never stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup<'a> {
    /// One namespace was audited (`-n`): only its report.
    Namespace(&'a str),
    /// Every managed report of the API.
    Everywhere,
    /// None: the reports written are all there is (`doctor`'s one).
    Nothing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Applied { kind: &'static str, name: String, summary: Summary },
    Deleted { kind: &'static str, name: String },
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Written::Applied { kind, name, summary } => write!(
                f,
                "wrote {kind} {name}: {} fail, {} warn, {} error, {} skip, {} pass",
                summary.fail, summary.warn, summary.error, summary.skip, summary.pass
            ),
            Written::Deleted { kind, name } => {
                write!(f, "deleted {kind} {name}: no audited object left")
            }
        }
    }
}

/// `choice`, or with None the one the cluster serves, OpenReports first.
/// An API that is not served is an error.
pub async fn report_api(
    client: &Client,
    choice: Option<ReportApi>,
    scope: ReportScope,
) -> Result<ReportApi, ReportsError> {
    let candidates = match choice {
        Some(api) => vec![api],
        None => ReportApi::ALL.to_vec(),
    };
    for api in &candidates {
        if served(client, *api, scope).await? {
            return Ok(*api);
        }
    }
    Err(match choice {
        Some(api) => {
            ReportsError::NotServed { api_version: api.api_version(), kind: api.kind(scope) }
        }
        None => ReportsError::NeitherServed,
    })
}

/// Then deletes the managed reports of `api` within `cleanup` not among
/// them.
pub async fn write_reports(
    client: &Client,
    api: ReportApi,
    reports: &[Report],
    cleanup: Cleanup<'_>,
) -> Result<Vec<Written>, ReportsError> {
    let mut written = Vec::new();
    let mut kept = BTreeSet::new();
    for report in reports {
        let scope = report.report_scope;
        let kind = api.kind(scope);
        let name = report.display_name();
        let body = serde_json::to_value(report).map_err(|source| ReportsError::Encode {
            kind,
            name: name.clone(),
            source,
        })?;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        handle(client, api, scope, report.metadata.namespace.as_deref())
            .patch(&report.metadata.name, &params, &Patch::Apply(&body))
            .await
            .map_err(|source| ReportsError::Api {
                action: "apply",
                kind,
                name: name.clone(),
                source,
            })?;
        kept.insert((scope, report.metadata.namespace.clone(), report.metadata.name.clone()));
        written.push(Written::Applied { kind, name, summary: report.summary });
    }
    let (scopes, namespace): (&[ReportScope], _) = match cleanup {
        Cleanup::Namespace(namespace) => (&[ReportScope::Namespaced], Some(namespace)),
        Cleanup::Everywhere => (&[ReportScope::Namespaced, ReportScope::Cluster], None),
        Cleanup::Nothing => (&[], None),
    };
    for &scope in scopes {
        let kind = api.kind(scope);
        let listed = handle(client, api, scope, namespace)
            .list_metadata(
                &ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}")),
            )
            .await;
        let stale = match listed {
            Ok(list) => list.items,
            // The cluster-scoped kind's CRD may not be installed.
            Err(error) if scope == ReportScope::Cluster && is_not_served(&error) => Vec::new(),
            Err(source) => {
                return Err(ReportsError::Api {
                    action: "list",
                    kind,
                    name: format!("reports labelled {MANAGED_BY_LABEL}={MANAGED_BY}"),
                    source,
                });
            }
        };
        for object in stale {
            let (Some(name), object_namespace) = (object.metadata.name, object.metadata.namespace)
            else {
                continue;
            };
            if name != REPORT_NAME
                || kept.contains(&(scope, object_namespace.clone(), name.clone()))
            {
                continue;
            }
            let shown = match &object_namespace {
                Some(namespace) => format!("{namespace}/{name}"),
                None => name.clone(),
            };
            match handle(client, api, scope, object_namespace.as_deref())
                .delete(&name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                // Gone already: what was wanted.
                Err(error) if is_not_served(&error) => {}
                Err(source) => {
                    return Err(ReportsError::Api { action: "delete", kind, name: shown, source });
                }
            }
            written.push(Written::Deleted { kind, name: shown });
        }
    }
    Ok(written)
}

/// Whether the cluster serves the API's kind of `scope`: one list of at
/// most one object; 404 says it does not.
async fn served(client: &Client, api: ReportApi, scope: ReportScope) -> Result<bool, ReportsError> {
    match handle(client, api, scope, None).list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(error) if is_not_served(&error) => Ok(false),
        Err(source) => Err(ReportsError::Api {
            action: "list",
            kind: api.kind(scope),
            name: format!("{} (to tell whether it is served)", api.api_version()),
            source,
        }),
    }
}

fn handle(
    client: &Client,
    api: ReportApi,
    scope: ReportScope,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(api.group(), api.version(), api.kind(scope));
    let resource = ApiResource::from_gvk_with_plural(&gvk, api.plural(scope));
    match namespace {
        Some(namespace) if scope == ReportScope::Namespaced => {
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    }
}
