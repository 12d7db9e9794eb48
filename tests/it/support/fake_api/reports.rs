//! The policy report kinds, served as their CRDs make them
//! (`tests/crds/`): `wgpolicyk8s.io/v1alpha2` PolicyReport and
//! ClusterPolicyReport, `openreports.io/v1alpha1` Report and ClusterReport.
//! The fake serves neither until a test says so: an API not served answers
//! 404, as a cluster without the CRD does.

use gpu_policy::reports::{ReportApi, ReportScope};

use super::{FakeApi, KindInfo};

/// Serves both kinds of `report_api`.
pub fn serve(api: &FakeApi, report_api: ReportApi) {
    for scope in [ReportScope::Namespaced, ReportScope::Cluster] {
        api.register_kind(KindInfo::new(
            report_api.kind(scope),
            report_api.group(),
            report_api.version(),
            report_api.plural(scope),
            scope == ReportScope::Namespaced,
        ));
    }
}

/// The stored namespaced reports of `report_api`, by namespace then name.
pub fn stored(api: &FakeApi, report_api: ReportApi) -> Vec<serde_json::Value> {
    api.objects(report_api.kind(ReportScope::Namespaced))
}
