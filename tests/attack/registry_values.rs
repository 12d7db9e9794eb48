//! Image configs whose CUDA values are megabytes long. Anyone may push an
//! image to a public registry of the default list and name it in a pod:
//! its config (up to the 4 MiB read) then reaches the resolver's caches,
//! the cache of what configs mean, and the reasons of the failures kept
//! for a while. Forty such images, each config some 3.7 MB carrying three
//! values of 1.2 MB, admitted eight at a time (as many as the server
//! fetches at once), must keep the peak under
//! [`PEAK_RSS`]; the values too long to be kept make the image's config
//! unusable, and the pod is left to the image table with that reason.

use crate::support::gpu_pod;
use serde_json::{Value, json};

use crate::PEAK_RSS;
use crate::support::fake_registry::{Auth, FakeRegistry, image_config, registry_config};
use crate::support::server::{ENFORCE, Options, Server, write_atomically};

const MIB: f64 = (1 << 20) as f64;

/// The hostile images, and how many are admitted at once.
const IMAGES: usize = 40;
const AT_ONCE: usize = 8;
/// The length of each long value.
const VALUE_BYTES: usize = 1_200_000;

/// The `NVIDIA_REQUIRE_CUDA` of the CUDA 13.0 images, alternatives
/// repeated until it is [`VALUE_BYTES`] long: every part of it a
/// requirement the toolkit reads.
fn long_requirement(seed: usize) -> String {
    let mut text = format!("cuda>=13.0 brand=tesla,driver>=535,driver<{}", 536 + seed);
    while text.len() < VALUE_BYTES {
        text.push_str(" brand=tesla,driver>=535,driver<536");
    }
    text
}

/// `letter` [`VALUE_BYTES`] times.
fn filler(letter: char) -> String {
    std::iter::repeat_n(letter, VALUE_BYTES).collect()
}

/// The config of hostile image `n`; no two are alike. A third carry a
/// valid requirement of 1.2 MB beside a valid `CUDA_VERSION` and a label
/// and another env of 1.2 MB; a third carry long values that read as
/// nothing; a third a `config` that is one long string, which the JSON
/// reader's error quotes.
fn hostile_config(n: usize) -> Value {
    match n % 3 {
        0 => image_config(
            &[
                "CUDA_VERSION=13.0.2",
                &format!("NVIDIA_REQUIRE_CUDA={}", long_requirement(n)),
                &format!("NOTES={}", filler('n')),
            ],
            &[("com.nvidia.cuda.version", &format!("13.0.{n}{}", filler('2')))],
        ),
        1 => image_config(
            &[
                &format!("CUDA_VERSION=13.{n}{}", filler('0')),
                &format!("NVIDIA_REQUIRE_CUDA=cuda>=13.{n} {}", filler('x')),
            ],
            &[("com.nvidia.cuda.version", &filler('1'))],
        ),
        _ => json!({
            "architecture": "amd64",
            "os": "linux",
            "config": format!("{n}{}", filler('c').repeat(3)),
        }),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn forty_image_configs_of_megabyte_values_stay_under_the_peak() {
    let _alone = crate::alone();
    // Two registries: each holds four lookups at most, and the server
    // runs eight fetches at once.
    let registries = [FakeRegistry::start(Auth::None).await, FakeRegistry::start(Auth::None).await];
    let images: Vec<String> = (0..IMAGES)
        .map(|n| {
            let registry = &registries[n % 2];
            let repository = format!("hostile/image{n}");
            registry.push_image(&repository, "1", &hostile_config(n));
            format!("{}/{repository}:1", registry.host())
        })
        .collect();
    let hosts: Vec<String> = registries.iter().map(FakeRegistry::host).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    write_atomically(&config, registry_config(&hosts, "4s", "").as_bytes());
    let server =
        Server::start(Options { config: Some(config), release: true, ..Options::default() }, None)
            .await;
    let base = server.memory("VmRSS");

    let mut annotations = Vec::new();
    for batch in images.chunks(AT_ONCE) {
        let admissions = batch.iter().map(|image| {
            let server = &server;
            async move {
                let mut connection = server.connect().await;
                let response =
                    connection.admit(ENFORCE, &gpu_pod().namespace("ml").image(image).json()).await;
                assert_eq!(response["allowed"], true, "{image}: {response}");
                let annotation = response["auditAnnotations"]["image-resolution"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                (image.clone(), annotation)
            }
        });
        annotations.extend(futures::future::join_all(admissions).await);
    }
    let peak = server.memory("VmHWM");
    eprintln!(
        "{IMAGES} image configs with values of {VALUE_BYTES} bytes, {AT_ONCE} at a time: base \
         {:.1} MiB, peak {:.1} MiB (bound {:.1} MiB), {:.1} MiB resident after",
        base as f64 / MIB,
        peak as f64 / MIB,
        PEAK_RSS as f64 / MIB,
        server.memory("VmRSS") as f64 / MIB,
    );
    assert!(
        peak <= PEAK_RSS,
        "peak RSS {:.1} MiB is over {:.1} MiB",
        peak as f64 / MIB,
        PEAK_RSS as f64 / MIB
    );
    // Every image was read, and none of its long values used: each pod is
    // left to the table, with a short reason, and the log says which value
    // was too long.
    for (n, (image, annotation)) in annotations.iter().enumerate() {
        let reason = match n % 3 {
            0 | 1 => "unreadable image config",
            _ => "registry lookup failed",
        };
        assert_eq!(
            annotation,
            &format!("compute-affinity: table used for {image}: {reason}"),
            "{image}"
        );
    }
    let log = server.log();
    assert!(
        log.contains("NVIDIA_REQUIRE_CUDA is 1,200,")
            && log.contains("bytes long, more than the 4 KiB an image config value may be"),
        "{:.2000}",
        log
    );
}
