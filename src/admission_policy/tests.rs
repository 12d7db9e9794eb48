use super::*;

/// Each entry's policies stand for its rule, at most two of them.
#[test]
fn the_generated_policies_are_their_rules() {
    let settings = Settings::default();
    for (rule, entry) in entries() {
        let policies = generated(rule, entry, &settings, KubernetesVersion::default());
        let all = policies.validating.iter().chain(&policies.mutating);
        assert!(all.clone().all(|p| p.rule == rule), "{rule}");
        assert!(all.clone().count() <= 2, "{rule}");
        assert!(
            policies.validating.iter().all(|p| p.object["kind"] == "ValidatingAdmissionPolicy")
                && policies.mutating.iter().all(|p| p.object["kind"] == "MutatingAdmissionPolicy"),
            "{rule}"
        );
    }
}

/// Settings may leave a mutation out (`runtimeClassName: ""`).
#[test]
fn without_a_runtime_class_to_inject_there_is_no_injection() {
    let settings = match Settings::from_yaml("runtimeClassName: ''", "test") {
        Ok(settings) => settings,
        Err(err) => panic!("{err}"),
    };
    let runtime_class = |settings: &Settings| {
        all_generated(settings, KubernetesVersion::default())
            .mutating
            .iter()
            .filter(|p| p.rule == RuleId::RuntimeClass)
            .count()
    };
    assert_eq!(runtime_class(&Settings::default()), 1);
    assert_eq!(runtime_class(&settings), 0);
}

/// CEL's own functions and operators, in every release.
const STANDARD: &[&str] = &[
    "!_",
    "-_",
    "@in",
    "@not_strictly_false",
    "_!=_",
    "_&&_",
    "_+_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "_<=_",
    "_<_",
    "_==_",
    "_>=_",
    "_>_",
    "_?_:_",
    "_[_]",
    "_||_",
    "bool",
    "bytes",
    "contains",
    "double",
    "dyn",
    "endsWith",
    "int",
    "matches",
    "size",
    "startsWith",
    "string",
    "type",
    "uint",
];

/// Every function the generated policies call is CEL's own or in the
/// table of the release that introduced it, so that rendering for an
/// older release can tell what it refuses.
#[test]
fn every_function_the_policies_call_has_a_release() {
    let all = all_generated(&Settings::default(), KubernetesVersion::default());
    for policy in all.validating.iter().chain(&all.mutating) {
        for expression in expressions(&policy.object) {
            let called = releases::functions(expression).unwrap_or_else(|e| panic!("{e}"));
            for function in called {
                assert!(
                    STANDARD.contains(&function.as_str())
                        || releases::introduced(&function).is_some(),
                    "{}: `{function}` has no release in kubernetes_cel::releases",
                    policy.name
                );
            }
        }
    }
}

/// The newest release renders every policy; each older one leaves out
/// exactly what its CEL lacks.
#[test]
fn each_release_renders_what_its_cel_accepts() {
    let settings = Settings::default();
    let newest = all_generated(&settings, KubernetesVersion::default());
    assert!(newest.left_out.is_empty(), "{:?}", newest.left_out);
    for release in KubernetesVersion::supported() {
        let all = all_generated(&settings, release);
        for policy in all.validating.iter().chain(&all.mutating) {
            assert_eq!(refused_functions(&policy.object, release), Ok(vec![]), "{}", policy.name);
        }
        let left_out: Vec<&str> = all.left_out.iter().map(|l| l.policy.as_str()).collect();
        let expected: &[&str] =
            if release.minor() <= 34 { &["gpu-policy-visible-devices"] } else { &[] };
        assert_eq!(left_out, expected, "{release}");
    }
}

fn kinds(rendered: &Rendered) -> Vec<(String, String)> {
    rendered
        .objects
        .iter()
        .map(|o| {
            (
                o["apiVersion"].as_str().unwrap_or("").to_owned(),
                o["kind"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn before_1_34_no_mutating_policy_is_rendered_and_a_note_says_so() {
    let rendered = manifests(&Settings::default(), true, KubernetesVersion::new(33));
    assert!(kinds(&rendered).iter().all(|(_, kind)| kind.starts_with("Validating")));
    assert_eq!(rendered.notes.len(), 1, "{:?}", rendered.notes);
    assert!(
        rendered.notes[0]
            .starts_with("no MutatingAdmissionPolicies: Kubernetes 1.33 does not serve them")
    );
}

#[test]
fn in_1_34_and_1_35_mutating_policies_are_v1beta1() {
    for minor in [34, 35] {
        let rendered = manifests(&Settings::default(), true, KubernetesVersion::new(minor));
        let mutating: Vec<(String, String)> =
            kinds(&rendered).into_iter().filter(|(_, kind)| kind.starts_with("Mutating")).collect();
        assert!(!mutating.is_empty());
        assert!(
            mutating.iter().all(|(version, _)| version == "admissionregistration.k8s.io/v1beta1"),
            "{mutating:?}"
        );
        assert!(
            rendered.notes.iter().any(|n| n.contains("feature gate MutatingAdmissionPolicy=true"))
        );
    }
    let rendered = manifests(&Settings::default(), true, KubernetesVersion::new(34));
    assert!(rendered.notes.iter().any(|n| n.starts_with(
            "gpu-policy-visible-devices left out: the CEL of Kubernetes 1.34 lacks `flatten` (from Kubernetes 1.35)"
        )), "{:?}", rendered.notes);
}

/// Without --mutating-policies nothing is said of them.
#[test]
fn validating_policies_alone_say_nothing_of_mutating_ones() {
    let rendered = manifests(&Settings::default(), false, KubernetesVersion::new(34));
    assert_eq!(rendered.notes, Vec::<String>::new());
    assert_eq!(
        manifests(&Settings::default(), true, KubernetesVersion::new(36)).notes,
        Vec::<String>::new()
    );
}

#[test]
fn the_claim_policy_names_the_releases_resource_version() {
    let claim_versions = |minor| -> Vec<Value> {
        all_generated(&Settings::default(), KubernetesVersion::new(minor))
            .validating
            .iter()
            .filter(|p| p.name.ends_with("-claims"))
            .map(|p| {
                p.object["spec"]["matchConstraints"]["resourceRules"][0]["apiVersions"].clone()
            })
            .collect()
    };
    assert_eq!(claim_versions(32), [json!(["v1beta1"])]);
    assert_eq!(claim_versions(34), [json!(["v1"])]);
}
