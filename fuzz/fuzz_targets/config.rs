//! The configuration file and the namespace annotations, from arbitrary
//! bytes.
//!
//! - `Settings::from_yaml`, what `serve --config` (and its reload) and
//!   `check --config` call on the file's text, returns settings or an error
//!   that fits on one line (it ends up in a log line or after `gpu-policy:`
//!   on stderr);
//! - `Settings::for_namespace` only tightens: each line of the input is tried
//!   as the value of both namespace annotations, against the defaults and the
//!   parsed settings; an ignored value leaves a one-line notice;
//! - the rules run with whatever settings parse: on a few pods the patch
//!   applies and the patched pod gets no further patch.

#![no_main]

use std::collections::BTreeMap;
use std::sync::LazyLock;

use gpu_policy::document::Document;
use gpu_policy::policy::{Evaluator, Scope, Subject};
use gpu_policy::settings::{
    MAX_GPUS_PER_POD_ANNOTATION, MIN_COMPUTE_CAPABILITY_ANNOTATION, NamespaceSettings, Settings,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

static DEFAULTS: LazyLock<Settings> = LazyLock::new(Settings::default);

/// A GPU pod, a pod with a CUDA image and no GPU, and a pod that already
/// names a runtime class and pins its devices.
static PODS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    vec![
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train"},
            "spec": {"containers": [{"name": "train", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "web", "image": "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mig"},
            "spec": {"runtimeClassName": "nvidia",
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [{"name": "mig", "image": "ubuntu:22.04",
                    "resources": {"requests": {"nvidia.com/mig-1g.5gb": "2"},
                                  "limits": {"nvidia.com/mig-1g.5gb": "2"}}}]}}),
    ]
});

fuzz_target!(|data: &[u8]| {
    // `Settings::load` reads the file as UTF-8 and refuses other bytes.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = match Settings::from_yaml(text, "config.yaml") {
        Ok(settings) => Some(settings),
        Err(err) => {
            let message = err.to_string();
            assert!(!message.contains('\n'), "the error spans lines:\n{message}");
            None
        }
    };
    for settings in std::iter::once(&*DEFAULTS).chain(parsed.as_ref()) {
        let mut namespaces = vec![settings.for_namespace(&BTreeMap::new())];
        for value in text.lines().take(8) {
            let annotations = BTreeMap::from([
                (MAX_GPUS_PER_POD_ANNOTATION.to_owned(), value.to_owned()),
                (
                    MIN_COMPUTE_CAPABILITY_ANNOTATION.to_owned(),
                    value.to_owned(),
                ),
            ]);
            let namespace = settings.for_namespace(&annotations);
            only_tightens(settings, &namespace, value);
            namespaces.push(namespace);
        }
        if parsed.is_some() {
            for namespace in &namespaces {
                for pod in PODS.iter() {
                    mutates_once(pod, settings, namespace);
                }
            }
        }
    }
});

fn only_tightens(settings: &Settings, namespace: &NamespaceSettings, value: &str) {
    let config = settings.config();
    assert!(
        namespace.max_per_pod <= config.max_per_pod,
        "{value:?} raised maxPerPod to {}",
        namespace.max_per_pod
    );
    if let Some(minimum) = config.min_compute_capability {
        assert!(
            namespace.min_compute_capability >= Some(minimum),
            "{value:?} lowered the minimum compute capability to {:?}",
            namespace.min_compute_capability
        );
    }
    let notices = gpu_policy::policy::Notice::of_ignored(namespace);
    assert!(notices.len() <= 2, "{notices:?}");
    for notice in &notices {
        assert!(notice.message.starts_with("gpu-policy: "), "{notice:?}");
        assert!(
            !notice.message.contains('\n'),
            "the notice spans lines: {notice:?}"
        );
    }
}

fn mutates_once(pod: &Value, settings: &Settings, namespace: &NamespaceSettings) {
    let evaluator = Evaluator {
        settings,
        namespace,
        cluster: None,
        nodes: None,
        claims: None,
        images: None,
        claim_owner: None,
    };
    let evaluate = |pod: &Value| {
        let document = Document::from_value(pod);
        evaluator
            .evaluate(&Subject::pod(document.root(), "default", Scope::Whole))
            .unwrap_or_else(|err| panic!("a well-formed pod is unreadable: {err}"))
    };
    let evaluation = evaluate(pod);
    let mut patched = pod.clone();
    if let Err(err) = json_patch::patch(&mut patched, &evaluation.patch) {
        panic!(
            "the patch does not apply: {err}\npatch: {:?}\nsettings: {:?}",
            evaluation.patch,
            settings.config()
        );
    }
    let again = evaluate(&patched);
    assert!(
        again.patch.is_empty(),
        "not idempotent: {:?}\npatched pod: {patched}\nsettings: {:?}",
        again.patch,
        settings.config()
    );
}
