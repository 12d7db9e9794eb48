//! The objects: the kinds served, the store, its history of changes.

use super::*;

/// How a kind is served: `kind` lives at `/apis/{group}/{version}/.../{plural}`
/// (`/api/{version}/...` for the core group, whose `group` is empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindInfo {
    pub kind: String,
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespaced: bool,
}

impl KindInfo {
    pub fn new(kind: &str, group: &str, version: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            kind: kind.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            namespaced,
        }
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn same_resource(&self, other: &KindInfo) -> bool {
        self.group == other.group && self.version == other.version && self.plural == other.plural
    }
}

/// The kinds served from the start: (kind, group, version, plural, namespaced).
pub const KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("Namespace", "", "v1", "namespaces", false),
    ("Node", "", "v1", "nodes", false),
    ("Pod", "", "v1", "pods", true),
    ("Secret", "", "v1", "secrets", true),
    ("ConfigMap", "", "v1", "configmaps", true),
    ("ReplicationController", "", "v1", "replicationcontrollers", true),
    ("PodTemplate", "", "v1", "podtemplates", true),
    ("Service", "", "v1", "services", true),
    ("ServiceAccount", "", "v1", "serviceaccounts", true),
    ("Event", "", "v1", "events", true),
    ("RuntimeClass", "node.k8s.io", "v1", "runtimeclasses", false),
    ("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", true),
    ("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", true),
    ("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", false),
    ("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", false),
    ("DaemonSet", "apps", "v1", "daemonsets", true),
    ("Deployment", "apps", "v1", "deployments", true),
    ("ReplicaSet", "apps", "v1", "replicasets", true),
    ("StatefulSet", "apps", "v1", "statefulsets", true),
    ("Job", "batch", "v1", "jobs", true),
    ("CronJob", "batch", "v1", "cronjobs", true),
    ("Lease", "coordination.k8s.io", "v1", "leases", true),
    (
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        false,
    ),
    (
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        false,
    ),
];

/// (group, version, plural, namespace or "", name)
pub type Key = (String, String, String, String, String);

pub fn key_of(kind: &KindInfo, namespace: &str, name: &str) -> Key {
    (
        kind.group.clone(),
        kind.version.clone(),
        kind.plural.clone(),
        if kind.namespaced { namespace.to_owned() } else { String::new() },
        name.to_owned(),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One write, kept in the history log and broadcast to open watches.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub kind: KindInfo,
    pub change: ChangeType,
    pub object: Value,
    /// The object before a modification (to turn MODIFIED into ADDED or
    /// DELETED for label-selector watches).
    pub previous: Option<Value>,
}

pub struct Store {
    /// The current (last handed out) resourceVersion.
    pub rv: u64,
    /// Watches from a resourceVersion below this get 410 Expired.
    pub floor: u64,
    pub next_uid: u64,
    pub kinds: Vec<KindInfo>,
    pub objects: BTreeMap<Key, Value>,
    pub history: Vec<Arc<Change>>,
}

impl Store {
    pub fn new() -> Self {
        Self {
            rv: 1,
            floor: 0,
            next_uid: 1,
            kinds: KINDS.iter().map(|(k, g, v, p, n)| KindInfo::new(k, g, v, p, *n)).collect(),
            objects: BTreeMap::new(),
            history: Vec::new(),
        }
    }

    pub fn kind_by_api_version(&self, api_version: &str, kind: &str) -> Option<KindInfo> {
        self.kinds.iter().find(|k| k.kind == kind && k.api_version() == api_version).cloned()
    }

    pub fn kind_by_name(&self, kind: &str) -> Option<KindInfo> {
        self.kinds.iter().find(|k| k.kind == kind).cloned()
    }

    pub fn kind_by_plural(&self, group: &str, version: &str, plural: &str) -> Option<KindInfo> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
            .cloned()
    }

    pub fn new_uid(&mut self) -> String {
        let n = self.next_uid;
        self.next_uid += 1;
        format!("fa4e0000-0000-4000-8000-{n:012x}")
    }

    pub fn record(&mut self, changes: &broadcast::Sender<Arc<Change>>, change: Change) {
        let change = Arc::new(change);
        self.history.push(change.clone());
        // No receiver is not an error: nobody is watching.
        let _ = changes.send(change);
    }

    /// Creates or replaces `obj` (whose namespace and name must be set),
    /// assigning a new resourceVersion, and records the change. `trusted`
    /// writes (from the test itself) keep a given uid, creationTimestamp and
    /// generation; writes over HTTP get them from the server like the real one.
    pub fn commit(
        &mut self,
        changes: &broadcast::Sender<Arc<Change>>,
        kind: &KindInfo,
        mut obj: Value,
        trusted: bool,
    ) -> Value {
        let namespace = if kind.namespaced { meta_str(&obj, "namespace") } else { String::new() };
        let name = meta_str(&obj, "name");
        let key = key_of(kind, &namespace, &name);
        let previous = self.objects.get(&key).cloned();

        let given = |field: &str| {
            Some(obj["metadata"][field].clone()).filter(|v| trusted && !v.is_null() && *v != "")
        };
        let (uid, created, generation) = match &previous {
            Some(prev) => {
                let prev_generation = prev["metadata"]["generation"].as_i64().unwrap_or(1);
                let generation = if spec_of(prev) == spec_of(&obj) {
                    prev_generation
                } else {
                    prev_generation + 1
                };
                (
                    given("uid").unwrap_or_else(|| prev["metadata"]["uid"].clone()),
                    given("creationTimestamp")
                        .unwrap_or_else(|| prev["metadata"]["creationTimestamp"].clone()),
                    given("generation").unwrap_or_else(|| generation.into()),
                )
            }
            None => (
                given("uid").unwrap_or_else(|| self.new_uid().into()),
                given("creationTimestamp").unwrap_or_else(|| now_rfc3339().into()),
                given("generation").unwrap_or_else(|| 1.into()),
            ),
        };

        self.rv += 1;
        let body = obj.as_object_mut().expect("a Kubernetes object is a JSON object");
        body.insert("apiVersion".into(), kind.api_version().into());
        body.insert("kind".into(), kind.kind.clone().into());
        let meta = body
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("metadata is a JSON object");
        if !kind.namespaced {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), uid);
        meta.insert("creationTimestamp".into(), created);
        meta.insert("generation".into(), generation);
        meta.insert("resourceVersion".into(), self.rv.to_string().into());

        self.objects.insert(key, obj.clone());
        let change = if previous.is_some() { ChangeType::Modified } else { ChangeType::Added };
        self.record(
            changes,
            Change { rv: self.rv, kind: kind.clone(), change, object: obj.clone(), previous },
        );
        obj
    }

    /// Deletes an object, recording a DELETED change at a new resourceVersion.
    pub fn erase(
        &mut self,
        changes: &broadcast::Sender<Arc<Change>>,
        kind: &KindInfo,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let mut obj = self.objects.remove(&key_of(kind, namespace, name))?;
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = self.rv.to_string().into();
        self.record(
            changes,
            Change {
                rv: self.rv,
                kind: kind.clone(),
                change: ChangeType::Deleted,
                object: obj.clone(),
                previous: None,
            },
        );
        Some(obj)
    }

    /// The objects `filter` selects, in key order (namespace, then name).
    pub fn select(&self, filter: &Filter) -> Vec<Value> {
        self.select_page(filter, None, None).0
    }

    /// One page of what `filter` selects: at most `limit` objects whose
    /// (namespace, name) comes after `after`, and whether more follow.
    /// Only the kind's range of the store is read (one namespace's range
    /// when the filter names one), and only the page is cloned, so paging
    /// through a large kind stays linear.
    pub fn select_page(
        &self,
        filter: &Filter,
        after: Option<&(String, String)>,
        limit: Option<usize>,
    ) -> (Vec<Value>, bool) {
        let kind = &filter.kind;
        let namespace = filter.namespace.clone().filter(|_| kind.namespaced).unwrap_or_default();
        let resource = (kind.group.clone(), kind.version.clone(), kind.plural.clone());
        let first = (
            resource.0.clone(),
            resource.1.clone(),
            resource.2.clone(),
            namespace.clone(),
            String::new(),
        );
        let start = match after {
            Some((after_namespace, after_name)) if *after_namespace >= namespace => {
                Bound::Excluded(key_of(kind, after_namespace, after_name))
            }
            _ => Bound::Included(first),
        };
        let mut selected = self
            .objects
            .range((start, Bound::Unbounded))
            .take_while(|((g, v, p, ns, _), _)| {
                (g, v, p) == (&resource.0, &resource.1, &resource.2)
                    && (namespace.is_empty() || *ns == namespace)
            })
            .filter(|(_, obj)| filter.matches(obj));
        let limit = limit.unwrap_or(usize::MAX);
        let page: Vec<Value> = selected.by_ref().take(limit).map(|(_, obj)| obj.clone()).collect();
        let more = selected.next().is_some();
        (page, more)
    }
}

/// Everything but the bookkeeping, to tell whether a write bumps `generation`.
pub fn spec_of(obj: &Value) -> Value {
    let mut spec = obj.clone();
    if let Some(map) = spec.as_object_mut() {
        for field in ["metadata", "status", "apiVersion", "kind"] {
            map.remove(field);
        }
    }
    spec
}

pub fn meta_str(obj: &Value, field: &str) -> String {
    obj["metadata"][field].as_str().unwrap_or_default().to_owned()
}
