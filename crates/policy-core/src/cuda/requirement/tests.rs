//! Table tests of the requirement language and the driver floor, on the
//! strings real images carry.

use super::*;

impl Atom {
    /// Every node that meets `other` meets `self`.
    fn is_weaker_than(&self, other: &Atom) -> bool {
        let cuda = self.cuda.is_none_or(|c| other.cuda.is_some_and(|o| o >= c));
        let from = self.driver_from.is_none_or(|f| other.driver_from.is_some_and(|o| o >= f));
        let below = self.driver_below.is_none_or(|b| other.driver_below.is_some_and(|o| o <= b));
        cuda && from && below
    }
}
use rstest::rstest;

/// `NVIDIA_REQUIRE_CUDA` of the `nvidia/cuda:13.0.2` images, as the config
/// of `vllm/vllm-openai:v0.23.0` (built on them) carries it.
const CUDA_13_0_2: &str = "cuda>=13.0 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536 brand=vapps,driver>=535,driver<536 brand=vpc,driver>=535,driver<536 brand=vcs,driver>=535,driver<536 brand=vws,driver>=535,driver<536 brand=cloudgaming,driver>=535,driver<536 brand=unknown,driver>=550,driver<551 brand=grid,driver>=550,driver<551 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551 brand=quadro,driver>=550,driver<551 brand=quadrortx,driver>=550,driver<551 brand=nvidiartx,driver>=550,driver<551 brand=vapps,driver>=550,driver<551 brand=vpc,driver>=550,driver<551 brand=vcs,driver>=550,driver<551 brand=vws,driver>=550,driver<551 brand=cloudgaming,driver>=550,driver<551 brand=unknown,driver>=565,driver<566 brand=grid,driver>=565,driver<566 brand=tesla,driver>=565,driver<566 brand=nvidia,driver>=565,driver<566 brand=quadro,driver>=565,driver<566 brand=quadrortx,driver>=565,driver<566 brand=nvidiartx,driver>=565,driver<566 brand=vapps,driver>=565,driver<566 brand=vpc,driver>=565,driver<566 brand=vcs,driver>=565,driver<566 brand=vws,driver>=565,driver<566 brand=cloudgaming,driver>=565,driver<566 brand=unknown,driver>=570,driver<571 brand=grid,driver>=570,driver<571 brand=tesla,driver>=570,driver<571 brand=nvidia,driver>=570,driver<571 brand=quadro,driver>=570,driver<571 brand=quadrortx,driver>=570,driver<571 brand=nvidiartx,driver>=570,driver<571 brand=vapps,driver>=570,driver<571 brand=vpc,driver>=570,driver<571 brand=vcs,driver>=570,driver<571 brand=vws,driver>=570,driver<571 brand=cloudgaming,driver>=570,driver<571 brand=unknown,driver>=575,driver<576 brand=grid,driver>=575,driver<576 brand=tesla,driver>=575,driver<576 brand=nvidia,driver>=575,driver<576 brand=quadro,driver>=575,driver<576 brand=quadrortx,driver>=575,driver<576 brand=nvidiartx,driver>=575,driver<576 brand=vapps,driver>=575,driver<576 brand=vpc,driver>=575,driver<576 brand=vcs,driver>=575,driver<576 brand=vws,driver>=575,driver<576 brand=cloudgaming,driver>=575,driver<576";

/// `NVIDIA_REQUIRE_CUDA` of the `nvidia/cuda:12.8.1` images (the config of
/// an image built `FROM nvidia/cuda:12.8.1-devel-ubuntu22.04`, with
/// `CUDA_VERSION=12.8.1`).
const CUDA_12_8_1: &str = "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=grid,driver>=470,driver<471 brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=vapps,driver>=470,driver<471 brand=vpc,driver>=470,driver<471 brand=vcs,driver>=470,driver<471 brand=vws,driver>=470,driver<471 brand=cloudgaming,driver>=470,driver<471 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536 brand=vapps,driver>=535,driver<536 brand=vpc,driver>=535,driver<536 brand=vcs,driver>=535,driver<536 brand=vws,driver>=535,driver<536 brand=cloudgaming,driver>=535,driver<536 brand=unknown,driver>=550,driver<551 brand=grid,driver>=550,driver<551 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551 brand=quadro,driver>=550,driver<551 brand=quadrortx,driver>=550,driver<551 brand=nvidiartx,driver>=550,driver<551 brand=vapps,driver>=550,driver<551 brand=vpc,driver>=550,driver<551 brand=vcs,driver>=550,driver<551 brand=vws,driver>=550,driver<551 brand=cloudgaming,driver>=550,driver<551 brand=unknown,driver>=560,driver<561 brand=grid,driver>=560,driver<561 brand=tesla,driver>=560,driver<561 brand=nvidia,driver>=560,driver<561 brand=quadro,driver>=560,driver<561 brand=quadrortx,driver>=560,driver<561 brand=nvidiartx,driver>=560,driver<561 brand=vapps,driver>=560,driver<561 brand=vpc,driver>=560,driver<561 brand=vcs,driver>=560,driver<561 brand=vws,driver>=560,driver<561 brand=cloudgaming,driver>=560,driver<561 brand=unknown,driver>=565,driver<566 brand=grid,driver>=565,driver<566 brand=tesla,driver>=565,driver<566 brand=nvidia,driver>=565,driver<566 brand=quadro,driver>=565,driver<566 brand=quadrortx,driver>=565,driver<566 brand=nvidiartx,driver>=565,driver<566 brand=vapps,driver>=565,driver<566 brand=vpc,driver>=565,driver<566 brand=vcs,driver>=565,driver<566 brand=vws,driver>=565,driver<566 brand=cloudgaming,driver>=565,driver<566";

fn floor(text: &str) -> Option<DriverFloor> {
    match text.parse::<Requirement>() {
        Ok(requirement) => requirement.driver_floor(),
        Err(err) => panic!("{err}"),
    }
}

fn shown(text: &str) -> String {
    floor(text).map(|f| f.to_string()).unwrap_or_default()
}

#[rstest]
#[case("13.1", Some((13, 1)))]
#[case("13.1.0", Some((13, 1)))]
// NGC images: CUDA_VERSION=12.3.2.001 (Triton 23.12), 12.2.2.009 (PyTorch 23.10)
#[case("12.3.2.001", Some((12, 3)))]
#[case("12.2.2.009", Some((12, 2)))]
#[case("12", Some((12, 0)))]
#[case(" 12.8.1 ", Some((12, 8)))]
#[case("", None)]
#[case("12.", None)]
#[case("v12.8", None)]
#[case("1.2.3.4.5", None)]
fn cuda_versions_parse(#[case] text: &str, #[case] expected: Option<(u32, u32)>) {
    let parsed = text.parse::<CudaVersion>().ok();
    assert_eq!(parsed, expected.map(|(a, b)| CudaVersion::new(a, b)));
}

#[rstest]
// The CUDA images: their own CUDA version, or the forward-compatible
// branches their compat package supports (the brand is not checked).
#[case(CUDA_13_0_2, "CUDA 13.0 or branch 535, 550, 565, 570, 575")]
#[case(CUDA_12_8_1, "CUDA 12.8 or branch 470, 535, 550, 560, 565")]
// The NGC framework images declare cuda>=9.0 (PyTorch 23.10, Triton 23.12):
// every driver meets it, so there is no floor.
#[case("cuda>=9.0", "")]
// Images that declare only their CUDA version.
#[case("cuda>=13.1", "CUDA 13.1")]
#[case("cuda>=13.0", "CUDA 13.0")]
// The toolkit documentation's example: ORed alternatives.
#[case("cuda>=11.0 driver>=450", "CUDA 11.0 or driver >= 450.0")]
// ANDed constraints in one alternative.
#[case("cuda>=12.2,driver>=535", "CUDA 12.2 and driver >= 535.0")]
#[case("cuda>12.1", "CUDA 12.2")]
// A driver range over several branches, and a minor floor.
#[case(
    "cuda>=12.8 brand=tesla,driver>=525,driver<580",
    "CUDA 12.8 or driver >= 525.0 and driver < 580"
)]
#[case("cuda>=12.4 driver>=535.104,driver<536", "CUDA 12.4 or driver >= 535.104 and driver < 536")]
#[case(
    "cuda>=12.4 driver>=535.104.05,driver<536",
    "CUDA 12.4 or driver >= 535.105 and driver < 536"
)]
// Forward compatibility never holds for GeForce and TITAN: dropped.
#[case("cuda>=13.0 brand=geforce,driver>=535,driver<536", "CUDA 13.0")]
#[case(
    "cuda>=13.0 brand=titan,driver>=535,driver<536 brand=tesla,driver>=550,driver<551",
    "CUDA 13.0 or branch 550"
)]
// What labels cannot say drops its alternative; nothing left, no floor.
#[case("cuda>=13.0 arch>=7.5,driver>=535", "CUDA 13.0")]
#[case("arch>=7.5", "")]
// An empty driver range can never be met.
#[case("cuda>=13.0 driver>=536,driver<536", "CUDA 13.0")]
// A weaker alternative absorbs a stronger one.
#[case("cuda>=12.0 cuda>=12.8", "CUDA 12.0")]
fn driver_floors(#[case] text: &str, #[case] expected: &str) {
    assert_eq!(shown(text), expected, "{text}");
}

#[rstest]
#[case("")]
#[case("   ")]
#[case("cuda")]
#[case("cuda>=")]
#[case("cuda>=abc")]
#[case("cuda>>13.0")]
#[case("gpu>=1")]
#[case("cuda>=13.0,")]
#[case("cuda>=13.0 brand=te$la")]
#[case("cuda=>13")]
fn unreadable_requirements_are_errors(#[case] text: &str) {
    let err = text.parse::<Requirement>().err().map(|e| e.to_string());
    assert!(
        err.as_deref().is_some_and(|e| e.starts_with("NVIDIA_REQUIRE_CUDA ") && !e.contains('\n')),
        "{text:?}: {err:?}"
    );
}

fn expr(key: &str, operator: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": operator, "values": values})
}

#[test]
fn the_cuda_13_image_as_node_affinity() {
    let branches = ["535", "550", "565", "570", "575"];
    let expected = vec![
        vec![expr(RUNTIME_MAJOR_LABEL, "Gt", &["12"])],
        vec![expr(DRIVER_MAJOR_LABEL, "In", &branches)],
        vec![expr(OLD_RUNTIME_MAJOR_LABEL, "Gt", &["12"])],
        vec![expr(OLD_DRIVER_MAJOR_LABEL, "In", &branches)],
    ];
    assert_eq!(floor(CUDA_13_0_2).map(|f| f.alternatives()), Some(expected));
}

#[test]
fn minors_and_ranges_as_node_affinity() {
    let alternatives = floor("cuda>=12.4 driver>=535.104,driver<537 driver>=590")
        .map(|f| f.alternatives())
        .unwrap_or_default();
    let current: Vec<Vec<Value>> = alternatives.iter().take(5).cloned().collect();
    assert_eq!(
        current,
        vec![
            vec![
                expr(DRIVER_MAJOR_LABEL, "In", &["535"]),
                expr(DRIVER_MINOR_LABEL, "Gt", &["103"])
            ],
            vec![expr(DRIVER_MAJOR_LABEL, "In", &["536"])],
            vec![expr(DRIVER_MAJOR_LABEL, "Gt", &["589"])],
            vec![expr(RUNTIME_MAJOR_LABEL, "Gt", &["12"])],
            vec![expr(RUNTIME_MAJOR_LABEL, "In", &["12"]), expr(RUNTIME_MINOR_LABEL, "Gt", &["3"])],
        ]
    );
    // The same for the older label names.
    assert_eq!(alternatives.len(), 10);
    assert_eq!(
        alternatives[5],
        vec![
            expr(OLD_DRIVER_MAJOR_LABEL, "In", &["535"]),
            expr(OLD_DRIVER_MINOR_LABEL, "Gt", &["103"])
        ]
    );
    let wide = floor("driver>=525,driver<580").map(|f| f.alternatives());
    assert_eq!(
        wide.and_then(|a| a.first().cloned()),
        Some(vec![
            expr(DRIVER_MAJOR_LABEL, "Gt", &["524"]),
            expr(DRIVER_MAJOR_LABEL, "Lt", &["580"])
        ])
    );
}

#[test]
fn floors_of_two_images_meet_both() {
    let (Some(a), Some(b)) = (floor(CUDA_13_0_2), floor(CUDA_12_8_1)) else {
        panic!("no floors");
    };
    // Branches both images can use, the higher CUDA version, and branch 570
    // (which supports CUDA 12.8 itself) for the CUDA 12.8 image.
    let both = a.and(&b).map(|f| f.to_string());
    assert_eq!(
        both.as_deref(),
        Some(
            "CUDA 12.8 and driver >= 570.0 and driver < 571 or CUDA 12.8 and driver >= 575.0 and driver < 576 or CUDA 13.0 or branch 535, 550, 565"
        )
    );
    assert_eq!(a.and(&a), Some(a.clone()));
    let only = floor("cuda>=13.1").and_then(|c| c.and(&a)).map(|f| f.to_string());
    assert_eq!(only.as_deref(), Some("CUDA 13.1"));
}

#[test]
fn floors_no_driver_can_meet_together() {
    let (Some(a), Some(b)) = (floor("driver>=535,driver<536"), floor("driver>=550,driver<551"))
    else {
        panic!("no floors");
    };
    assert_eq!(a.and(&b), None);
}

/// The atoms of `atoms` no other is weaker than, by the definition: each
/// against every other, in their order.
fn minimal_pairwise(atoms: &[Atom]) -> Vec<Atom> {
    let mut sorted = atoms.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted
        .iter()
        .enumerate()
        .filter(|(index, atom)| {
            !sorted
                .iter()
                .enumerate()
                .any(|(other, weaker)| other != *index && weaker.is_weaker_than(atom))
        })
        .map(|(_, atom)| *atom)
        .collect()
}

proptest::proptest! {
    /// The sweep keeps exactly the atoms the pairwise definition keeps, in
    /// the same order (up to [`MAX_ATOMS`]).
    #[test]
    fn the_sweep_keeps_the_atoms_no_other_is_weaker_than(
        parts in proptest::collection::vec(
            (proptest::option::of(10u32..14), proptest::option::of(500u32..506),
             proptest::option::of(500u32..508)),
            1..40,
        )
    ) {
        let atoms: Vec<Atom> = parts
            .iter()
            .filter_map(|(cuda, from, below)| {
                Atom {
                    cuda: cuda.map(|minor| CudaVersion::new(12, minor)),
                    driver_from: from.map(|major| DriverVersion { major, minor: 0 }),
                    driver_below: below.map(|major| DriverVersion { major, minor: 0 }),
                }
                .normalized()
            })
            .filter(|atom| !atom.is_unconstrained())
            .collect();
        proptest::prop_assume!(!atoms.is_empty());
        let mut expected = minimal_pairwise(&atoms);
        expected.truncate(MAX_ATOMS);
        let kept = DriverFloor::from_atoms(atoms).map(|floor| floor.atoms);
        proptest::prop_assert_eq!(kept, Some(expected));
    }
}

/// A requirement of many disjoint driver ranges keeps the first
/// [`MAX_ATOMS`] of them, read in time linear in their number.
#[test]
fn a_requirement_of_thousands_of_alternatives_keeps_the_first_few() {
    let text: Vec<String> = (0..20_000)
        .map(|i| format!("driver>={}.{},driver<{}.0", 100 + i, i % 7, 101 + i))
        .collect();
    let floor = floor(&text.join(" ")).expect("a floor");
    assert_eq!(floor.atoms.len(), MAX_ATOMS);
    assert_eq!(
        floor.atoms.first().and_then(|atom| atom.driver_from),
        Some(DriverVersion { major: 100, minor: 0 })
    );
}
