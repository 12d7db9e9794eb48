//! The image table: the defaults on real tags, and the `imageResolution`
//! block's validation.

use super::*;
use crate::settings::Settings;
use crate::settings::tests::refusal;
use rstest::rstest;

/// The highest compute floor and the driver floor the table gives an image.
fn table(settings: &Settings, image: &str) -> (Option<ComputeCapability>, String) {
    let needs = settings.image_needs(image);
    let compute = needs.iter().filter_map(|n| n.compute_floor()).max();
    let mut floor = None;
    for need in &needs {
        if let Some(driver) = need.driver_floor() {
            floor = Some(match floor {
                None => driver,
                Some(current) => match driver.and(&current) {
                    Some(both) => both,
                    None => panic!("no driver meets both"),
                },
            });
        }
    }
    (compute, floor.map(|f| f.to_string()).unwrap_or_default())
}

#[rstest]
// The CUDA images and PyTorch's own images: minimums as before.
#[case("nvidia/cuda:13.0.1-runtime-ubuntu24.04", Some((7, 5)), "")]
#[case("docker.io/nvidia/cuda:12.6.3-base-ubuntu24.04", Some((5, 0)), "")]
#[case("nvcr.io/nvidia/cuda:11.8.0-base-ubuntu22.04", Some((3, 5)), "")]
#[case("pytorch/pytorch:2.9.0-cuda13.0-cudnn9-runtime", Some((7, 5)), "")]
#[case("pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime", Some((7, 0)), "")]
#[case("docker.io/pytorch/pytorch:2.7.1-cuda12.9-cudnn9-devel", Some((7, 0)), "")]
#[case("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", Some((5, 0)), "")]
#[case("pytorch/pytorch:2.5.1-cuda11.8-cudnn9-runtime", None, "")]
// NGC framework images: the CUDA version of their release month; they
// declare cuda>=9.0, so no driver floor.
#[case("nvcr.io/nvidia/pytorch:25.12-py3", Some((7, 5)), "")]
#[case("nvcr.io/nvidia/pytorch:25.08-py3", Some((7, 5)), "")]
#[case("nvcr.io/nvidia/pytorch:25.07-py3", Some((5, 0)), "")]
#[case("nvcr.io/nvidia/pytorch:24.05-py3", Some((5, 0)), "")]
#[case("nvcr.io/nvidia/pytorch:23.01-py3", Some((5, 0)), "")]
#[case("nvcr.io/nvidia/tritonserver:25.10-py3", Some((7, 5)), "")]
#[case("nvcr.io/nvidia/tritonserver:24.05-trtllm-python-py3", Some((5, 0)), "")]
#[case("nvcr.io/nvidia/tensorflow:25.02-tf2-py3", Some((5, 0)), "")]
#[case("nvcr.io/nvidia/jax:25.10-py3", Some((7, 5)), "")]
#[case("nvcr.io/nvidia/tensorrt:25.12-py3", Some((7, 5)), "")]
#[case("nvcr.io/nvidia/pytorch:26.03-py3", Some((7, 5)), "")]
// Not a release-month tag, not an NGC framework, or before 23.01.
#[case("nvcr.io/nvidia/pytorch:22.12-py3", None, "")]
#[case("nvcr.io/nvidia/nemo:25.09", None, "")]
#[case("registry.example/nvidia/pytorch:25.12-py3", None, "")]
// vLLM's CUDA-tagged images: the requirement of their CUDA base image.
#[case("vllm/vllm-openai:v0.11.0-cu130", Some((7, 5)), "CUDA 13.0 or branch 535, 550, 565, 570, 575")]
#[case("vllm/vllm-openai:v0.10.2-cu128", Some((5, 0)), "CUDA 12.8 or branch 470, 535, 550, 560, 565")]
#[case("vllm/vllm-openai:v0.11.0-cu129", Some((5, 0)), "")]
#[case("vllm/vllm-openai:latest", None, "")]
// Text Generation Inference: CUDA 12.2 drivers, as its README recommends.
#[case("ghcr.io/huggingface/text-generation-inference:3.3.4", Some((5, 0)), "CUDA 12.2")]
#[case("ghcr.io/huggingface/text-generation-inference:3.3.4-rocm", None, "")]
// Ollama ships CUDA 12 and 13 runners and picks one at start: no entry.
#[case("ollama/ollama:0.12.6", None, "")]
#[case("ubuntu:22.04", None, "")]
fn default_table(#[case] image: &str, #[case] compute: Option<(u32, u32)>, #[case] driver: &str) {
    let expected = compute.map(|(a, b)| ComputeCapability::new(a, b));
    assert_eq!(table(&Settings::default(), image), (expected, driver.to_owned()), "{image}");
}

#[test]
fn legacy_entries_add_to_the_table_and_off_empties_it() {
    let yaml =
        "imageComputeCapabilities: [{pattern: '^nvcr\\.io/nvidia/pytorch:', minimum: '8.0'}]";
    let settings = Settings::from_yaml(yaml, "c.yaml").unwrap_or_default();
    assert_eq!(
        table(&settings, "nvcr.io/nvidia/pytorch:25.12-py3").0,
        Some(ComputeCapability::new(8, 0))
    );
    assert_eq!(table(&settings, "nvidia/cuda:13.0.1-base").0, Some(ComputeCapability::new(7, 5)));
    let off = Settings::from_yaml(&format!("imageResolution: {{mode: 'off'}}\n{yaml}"), "c.yaml");
    let off = off.unwrap_or_default();
    assert_eq!(off.config().image_resolution.mode, ResolutionMode::Off);
    assert!(off.image_needs("nvcr.io/nvidia/pytorch:25.12-py3").is_empty());
}

#[test]
fn table_entries_with_a_cuda_version_and_requirement() {
    let yaml = r#"
imageResolution:
  table:
    - pattern: '^registry\.example/train:'
      cudaVersion: 12.9
    - pattern: '^registry\.example/serve:'
      cudaVersion: "13.0"
      minimum: "8.0"
      requireCuda: cuda>=13.0 brand=tesla,driver>=570,driver<571
"#;
    let settings = match Settings::from_yaml(yaml, "c.yaml") {
        Ok(settings) => settings,
        Err(err) => panic!("{err}"),
    };
    assert_eq!(settings.config().image_resolution.timeout, "1s");
    assert_eq!(
        table(&settings, "registry.example/train:1"),
        (Some(ComputeCapability::new(5, 0)), "CUDA 12.9".to_owned())
    );
    assert_eq!(
        table(&settings, "registry.example/serve:1"),
        (Some(ComputeCapability::new(8, 0)), "CUDA 13.0 or branch 570".to_owned())
    );
    // The given table replaces the defaults.
    assert!(settings.image_needs("nvcr.io/nvidia/pytorch:25.12-py3").is_empty());
}

#[rstest]
#[case(
    "imageResolution: {credentialsFile: ''}",
    "config: imageResolution.credentialsFile: empty path"
)]
#[case("imageResolution: {mode: cache}", "config file c.yaml: ")]
#[case("imageResolution: {timeout: 1}", "config: imageResolution.timeout: \"1\" is not a duration")]
#[case("imageResolution: {timeout: 0s}", "config: imageResolution.timeout: \"0s\"")]
#[case("imageResolution: {timeout: 10s}", "config: imageResolution.timeout: \"10s\"")]
#[case("imageResolution: {timeout: -1s}", "config: imageResolution.timeout: \"-1s\"")]
#[case(
    "imageResolution: {insecureRegistries: ['http://registry.local:5000']}",
    "config: imageResolution.insecureRegistries: \"http://registry.local:5000\": expected a host[:port], without a scheme"
)]
#[case(
    "imageResolution: {insecureRegistries: ['registry.local:http']}",
    "config: imageResolution.insecureRegistries: "
)]
#[case(
    "imageResolution: {insecureRegistries: ['registry.local/v2']}",
    "config: imageResolution.insecureRegistries: "
)]
#[case(
    "imageResolution: {insecureRegistries: ['']}",
    "config: imageResolution.insecureRegistries: "
)]
#[case(
    "imageResolution: {insecureRegistries: ['registry.local:5000']}",
    "config: imageResolution.insecureRegistries: \"registry.local:5000\" is not in imageResolution.registries; list it there too"
)]
#[case(
    "imageResolution: {registries: ['*.corp.local'], insecureRegistries: ['a.corp.local:5000']}",
    "config: imageResolution.insecureRegistries: \"a.corp.local:5000\" is not in imageResolution.registries"
)]
#[case(
    "imageResolution: {registries: ['*.corp.local'], insecureRegistries: ['*.corp.local']}",
    "config: imageResolution.insecureRegistries: \"*.corp.local\": expected a host[:port]; wildcards belong in imageResolution.registries"
)]
#[case(
    "imageResolution: {registries: ['https://nvcr.io']}",
    "config: imageResolution.registries: \"https://nvcr.io\": expected a host[:port], without a scheme"
)]
#[case(
    "imageResolution: {table: [{pattern: x}]}",
    "config: imageResolution.table: pattern \"x\": give cudaVersion or minimum"
)]
#[case(
    "imageResolution: {table: [{pattern: '(', minimum: '7.0'}]}",
    "config: imageResolution.table: pattern \"(\": "
)]
#[case(
    "imageResolution: {table: [{pattern: x, minimum: '7.0', requireCuda: 'cuda>=12.0'}]}",
    "config: imageResolution.table: pattern \"x\": requireCuda needs cudaVersion"
)]
#[case(
    "imageResolution: {table: [{pattern: x, cudaVersion: '12.0', requireCuda: 'cuda=>12'}]}",
    "config: imageResolution.table: pattern \"x\": NVIDIA_REQUIRE_CUDA \"cuda=>12\": "
)]
#[case("imageResolution: {table: [{pattern: x, cudaVersion: twelve}]}", "config file c.yaml: ")]
#[case(
    "imageResolution: {table: [{pattern: x, minimum: '7.0', cuda: '12.0'}]}",
    "config file c.yaml: "
)]
fn invalid_blocks_are_refused_on_one_line(#[case] yaml: &str, #[case] start: &str) {
    let text = refusal(yaml);
    assert!(text.starts_with(start), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

#[rstest]
#[case("registry.local:5000")]
#[case("registry.local")]
#[case("10.0.0.1:5000")]
#[case("[::1]:5000")]
fn insecure_registries_accepted(#[case] entry: &str) {
    let yaml = format!(
        "imageResolution: {{registries: ['{entry}'], insecureRegistries: ['{entry}'], timeout: 500ms}}"
    );
    let settings = Settings::from_yaml(&yaml, "c.yaml");
    assert_eq!(settings.map(|s| s.image_timeout().as_millis()).ok(), Some(500));
}

#[test]
fn registry_mode_with_its_credentials_file() {
    let yaml = "imageResolution:\n  mode: registry\n  timeout: 750ms\n  \
                credentialsFile: /etc/gpu-policy/registry/.dockerconfigjson\n";
    let settings = Settings::from_yaml(yaml, "c.yaml").unwrap_or_else(|e| panic!("{e}"));
    let block = &settings.config().image_resolution;
    assert_eq!(block.mode, ResolutionMode::Registry);
    assert_eq!(
        block.credentials_file.as_deref(),
        Some(std::path::Path::new("/etc/gpu-policy/registry/.dockerconfigjson"))
    );
    assert_eq!(settings.image_timeout().as_millis(), 750);
    // Registry mode keeps the table: it is the fallback.
    assert!(!settings.image_needs("nvcr.io/nvidia/pytorch:25.12-py3").is_empty());
}
