//! The modes, and the config file.

use super::*;

// ---------------------------------------------------------------------------
// Modes

#[test]
fn warn_mode_exits_0_with_short_prefixed_warnings() {
    let input = half_card_and_cuda_pods();
    let out = check_stdin(&["--mode", "warn", "-o", "json"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    let reports = out.json();
    let mut all = Vec::new();
    for report in &reports {
        assert_eq!(report["allowed"], true, "{report}");
        assert_eq!(report["patch"], json!([]), "warn mode changes nothing");
        for warning in report["warnings"].as_array().expect("warnings") {
            let warning = warning.as_str().expect("a string");
            assert!(warning.starts_with("gpu-policy:"), "{warning}");
            assert!(warning.chars().count() < 120, "{warning}");
            all.push(warning.to_owned());
        }
    }
    assert_eq!(
        all,
        vec![
            "gpu-policy: [bounded-requests] would deny: container \"app\": limits.nvidia.com/gpu is not a whole number; GPUs are whol…",
            "gpu-policy: [runtime-class] would set runtimeClassName: nvidia (GPU pod)",
            "gpu-policy: [compute-affinity] would require GPU compute capability >= 5.0 (image nvidia/cuda:12.6.3-base-ubuntu24.04)",
            "gpu-policy: [visible-devices] would pin NVIDIA_VISIBLE_DEVICES=void in container \"app\" (no GPU limit)",
        ]
    );
    let text = check_stdin(&["--mode", "warn"], &input);
    assert_eq!(text.code, 0);
    assert_eq!(text.last_line(), "2 objects (warn mode): 2 allowed, 0 denied, 0 ignored");
}

#[test]
fn audit_mode_exits_0_without_warnings_or_patch() {
    let input = half_card_and_cuda_pods();
    let out = check_stdin(&["--mode", "audit", "-o", "json"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    let reports = out.json();
    assert_eq!(reports.len(), 2);
    for report in &reports {
        assert_eq!(report["allowed"], true, "{report}");
        assert_eq!(report["warnings"], json!([]), "{report}");
        assert_eq!(report["patch"], json!([]), "{report}");
    }
    // The violation is still reported, for the audit trail.
    assert_eq!(reports[0]["violations"][0]["rule"], "bounded-requests");
    let yaml = check_stdin(&["--mode", "audit", "-o", "yaml"], CUDA_NO_GPU_POD);
    assert_eq!(yaml.code, 0);
    assert!(!yaml.stdout.contains("NVIDIA_VISIBLE_DEVICES"), "{}", yaml.stdout);
}

// ---------------------------------------------------------------------------
// Config

#[test]
fn config_file_changes_decisions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write(dir.path(), "config.yaml", "maxPerContainer: 1\n");
    let pod = gpu_pod().container("app").name("pair").gpus(2).manifest();
    assert_eq!(check_stdin(&[], &pod).code, 0);
    let out = check_stdin(&["--config", &config, "-o", "json"], &pod);
    assert_eq!(out.code, 1, "{out:?}");
    let message = out.json()[0]["violations"][0]["message"].clone();
    assert_eq!(
        message,
        "gpu-policy: container \"app\" must not ask for more than 1 nvidia.com/gpu per container; \
         split the work or lower the limit"
    );

    // A configured pin value is what gets pinned.
    let config = write(dir.path(), "pin.yaml", "visibleDevicesPin: none\n");
    let out = check_stdin(&["--config", &config, "-o", "yaml"], CUDA_NO_GPU_POD);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("value: none"), "{}", out.stdout);
}

#[test]
fn config_with_an_unknown_field_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write(dir.path(), "typo.yaml", "maxPerContainers: 1\n");
    let out = check(&["-f", &fixtures::path("11-seed-train-pod.yaml"), "--config", &config]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.starts_with(&format!("gpu-policy: config file {config}: ")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("maxPerContainers"), "{}", out.stderr);
}

#[test]
fn invalid_or_missing_config_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pod = fixtures::path("11-seed-train-pod.yaml");
    let config = write(dir.path(), "all.yaml", "visibleDevicesPin: all\n");
    let out = check(&["-f", &pod, "--config", &config]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("visibleDevicesPin"), "{}", out.stderr);

    let missing = dir.path().join("absent.yaml").display().to_string();
    let out = check(&["-f", &pod, "--config", &missing]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains(&missing), "{}", out.stderr);
}

// ---------------------------------------------------------------------------
// The admission policies of a Kubernetes release

/// `--engine cel --kube-version` decides with the policies rendered for
/// that release: before 1.34 no mutating policy pins the CUDA container,
/// from 1.36 one does; the validating policies deny on every release.
#[test]
fn check_with_the_policies_of_a_release() {
    let input = format!(
        "{}---\n{}",
        gpu_pod().container("app").name("many").gpus(99).manifest(),
        CUDA_NO_GPU_POD
    );
    let reports = |release: &str| -> Vec<serde_json::Value> {
        let out =
            check_stdin(&["--engine", "cel", "--kube-version", release, "-o", "json"], &input);
        assert_eq!(out.code, 1, "{out:?}");
        out.json()
    };
    for (release, pinned) in [("1.33", false), ("v1.36.3", true)] {
        let reports = reports(release);
        assert_eq!(reports[0]["allowed"], false, "{release}: {}", reports[0]);
        let patch = reports[1]["patch"].to_string();
        assert_eq!(patch.contains("NVIDIA_VISIBLE_DEVICES"), pinned, "{release}: {patch}");
    }
}

#[test]
fn kube_version_needs_the_cel_engine() {
    let out = check_stdin(&["--kube-version", "1.33"], CUDA_NO_GPU_POD);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stderr.trim(),
        "gpu-policy: --kube-version chooses the admission policies: it needs --engine cel"
    );
}
