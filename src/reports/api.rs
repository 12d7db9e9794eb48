//! The two report APIs gpu-policy writes, and the names its reports take;
//! docs/operations.md, "Policy reports", tables their groups and kinds.

/// The field manager of `audit --write-reports`' server-side applies.
pub const FIELD_MANAGER: &str = "gpu-policy-audit";
/// The name of every report gpu-policy writes: one per namespace, and the
/// cluster-scoped one, so a name never needs the namespace in it.
pub const REPORT_NAME: &str = "gpu-policy";
/// The label every report gpu-policy writes carries, and its value: what
/// `--write-reports` lists to find the reports it wrote before.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "gpu-policy";

/// Which report API a report is written in, displayed by the name
/// `--report-api` and `-o` give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::Display)]
pub enum ReportApi {
    /// `wgpolicyk8s.io/v1alpha2` PolicyReport and ClusterPolicyReport (the
    /// Kubernetes policy working group's, as Kyverno and Policy Reporter
    /// install them).
    #[strum(to_string = "wgpolicyk8s")]
    PolicyReport,
    /// `openreports.io/v1alpha1` Report and ClusterReport (OpenReports, the
    /// working group API's successor).
    #[strum(to_string = "openreports")]
    OpenReports,
}

/// Whether a report holds the results of one namespace's objects or of
/// cluster-scoped ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReportScope {
    Namespaced,
    Cluster,
}

impl ReportApi {
    /// Both, in the order `--report-api auto` prefers them.
    pub const ALL: [ReportApi; 2] = [ReportApi::OpenReports, ReportApi::PolicyReport];

    pub fn group(self) -> &'static str {
        match self {
            ReportApi::PolicyReport => "wgpolicyk8s.io",
            ReportApi::OpenReports => "openreports.io",
        }
    }

    pub fn version(self) -> &'static str {
        match self {
            ReportApi::PolicyReport => "v1alpha2",
            ReportApi::OpenReports => "v1alpha1",
        }
    }

    /// `group/version`.
    pub fn api_version(self) -> String {
        format!("{}/{}", self.group(), self.version())
    }

    pub fn kind(self, scope: ReportScope) -> &'static str {
        match (self, scope) {
            (ReportApi::PolicyReport, ReportScope::Namespaced) => "PolicyReport",
            (ReportApi::PolicyReport, ReportScope::Cluster) => "ClusterPolicyReport",
            (ReportApi::OpenReports, ReportScope::Namespaced) => "Report",
            (ReportApi::OpenReports, ReportScope::Cluster) => "ClusterReport",
        }
    }

    /// The resource's plural name, as URLs and RBAC rules name it.
    pub fn plural(self, scope: ReportScope) -> &'static str {
        match (self, scope) {
            (ReportApi::PolicyReport, ReportScope::Namespaced) => "policyreports",
            (ReportApi::PolicyReport, ReportScope::Cluster) => "clusterpolicyreports",
            (ReportApi::OpenReports, ReportScope::Namespaced) => "reports",
            (ReportApi::OpenReports, ReportScope::Cluster) => "clusterreports",
        }
    }

    /// Whether the schema has a report-level `source` (OpenReports does;
    /// the working group's PolicyReport has `source` on results only).
    pub fn has_report_source(self) -> bool {
        matches!(self, ReportApi::OpenReports)
    }
}
