use super::*;
use rstest::rstest;

fn needs(env: &[&str], labels: &[(&str, &str)]) -> ImageNeeds {
    match ImageNeeds::from_image_config(env.iter().copied(), labels.iter().copied()) {
        Ok(needs) => needs,
        Err(err) => panic!("{err}"),
    }
}

fn floor(needs: &ImageNeeds) -> String {
    needs.driver_floor().map(|f| f.to_string()).unwrap_or_default()
}

#[rstest]
// nvcr.io/nvidia/pytorch:23.10-py3 (its env, as `collect_env` prints it)
#[case(&["CUDA_VERSION=12.2.2.009", "NVIDIA_REQUIRE_CUDA=cuda>=9.0", "NVIDIA_PRODUCT_NAME=PyTorch"], Some((12, 2)), Some((5, 0)), "")]
// nvcr.io/nvidia/tritonserver:23.12-py3
#[case(&["NVIDIA_REQUIRE_CUDA=cuda>=9.0", "CUDA_VERSION=12.3.2.001", "NVIDIA_TRITON_SERVER_VERSION=23.12"], Some((12, 3)), Some((5, 0)), "")]
// vllm/vllm-openai:v0.23.0, built on nvidia/cuda:13.0.2 (abridged to the tesla brand)
#[case(&["CUDA_VERSION=13.0.2", "NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=tesla,driver>=535,driver<536 brand=tesla,driver>=550,driver<551 brand=tesla,driver>=570,driver<571"], Some((13, 0)), Some((7, 5)), "CUDA 13.0 or branch 535, 550, 570")]
// An image that declares its CUDA version only: it needs a driver for it.
#[case(&["CUDA_VERSION=13.1.0"], Some((13, 1)), Some((7, 5)), "CUDA 13.1")]
// Disabled requirements: the toolkit checks nothing.
#[case(&["CUDA_VERSION=13.1.0", "NVIDIA_REQUIRE_CUDA=cuda>=13.1", "NVIDIA_DISABLE_REQUIRE=true"], Some((13, 1)), Some((7, 5)), "")]
// The last entry of a name wins.
#[case(&["CUDA_VERSION=11.8.0", "CUDA_VERSION=12.6.3"], Some((12, 6)), Some((5, 0)), "CUDA 12.6")]
// Not a CUDA image.
#[case(&["PATH=/usr/bin", "HOME"], None, None, "")]
fn from_image_env(
    #[case] env: &[&str],
    #[case] cuda: Option<(u32, u32)>,
    #[case] compute: Option<(u32, u32)>,
    #[case] driver: &str,
) {
    let needs = needs(env, &[]);
    assert_eq!(needs.cuda, cuda.map(|(a, b)| CudaVersion::new(a, b)));
    assert_eq!(needs.compute_floor(), compute.map(|(a, b)| ComputeCapability::new(a, b)));
    assert_eq!(floor(&needs), driver);
}

#[test]
fn the_label_stands_in_for_a_missing_env() {
    let labeled = needs(&[], &[("maintainer", "x"), (CUDA_VERSION_LABEL, "12.8.1")]);
    assert_eq!(labeled.cuda, Some(CudaVersion::new(12, 8)));
    let both = needs(&["CUDA_VERSION=13.0.2"], &[(CUDA_VERSION_LABEL, "12.8.1")]);
    assert_eq!(both.cuda, Some(CudaVersion::new(13, 0)));
}

#[rstest]
#[case(&["CUDA_VERSION=thirteen"], "CUDA_VERSION=\"thirteen\" is not a CUDA version")]
#[case(&["NVIDIA_REQUIRE_CUDA=cuda=>13"], "NVIDIA_REQUIRE_CUDA \"cuda=>13\": ")]
fn unreadable_configs_say_what(#[case] env: &[&str], #[case] start: &str) {
    let err = ImageNeeds::from_image_config(env.iter().copied(), [])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.starts_with(start), "{err}");
}

#[rstest]
#[case(9, None)]
#[case(11, Some((3, 5)))]
#[case(12, Some((5, 0)))]
#[case(13, Some((7, 5)))]
#[case(14, Some((7, 5)))]
fn compute_floors_by_major(#[case] major: u32, #[case] expected: Option<(u32, u32)>) {
    assert_eq!(
        cuda_compute_floor(CudaVersion::new(major, 1)),
        expected.map(|(a, b)| ComputeCapability::new(a, b))
    );
}

#[test]
fn an_explicit_minimum_only_raises() {
    let mut needs = needs(&["CUDA_VERSION=12.9.1"], &[]);
    needs.minimum = Some(ComputeCapability::new(7, 0));
    assert_eq!(needs.compute_floor(), Some(ComputeCapability::new(7, 0)));
    needs.minimum = Some(ComputeCapability::new(3, 0));
    assert_eq!(needs.compute_floor(), Some(ComputeCapability::new(5, 0)));
}
