use super::*;
use serde_json::json;

impl ImageConfigFacts {
    /// An image config for tests: its CUDA env, requirement and label.
    pub fn of(
        cuda: Option<&str>,
        require: Option<&str>,
        label: Option<&str>,
    ) -> std::sync::Arc<ImageConfigFacts> {
        std::sync::Arc::new(ImageConfigFacts {
            cuda_version: cuda.map(str::to_owned),
            require_cuda: require.map(str::to_owned),
            cuda_label: label.map(str::to_owned),
            digest: "sha256:00".to_owned(),
            oversized: None,
        })
    }

    /// The `NVIDIA_REQUIRE_CUDA` of `nvidia/cuda:12.8.1`'s config: 30 brand
    /// and driver alternatives, some 1 KB, an ordinary long requirement.
    pub fn cuda_12_8_requirement() -> String {
        let mut require = "cuda>=12.8".to_owned();
        for driver in [470, 535, 550] {
            for brand in [
                "unknown",
                "grid",
                "tesla",
                "nvidia",
                "quadro",
                "quadrortx",
                "nvidiartx",
                "vapps",
                "vpc",
                "vcs",
            ] {
                require.push_str(&format!(" brand={brand},driver>={driver},driver<{}", driver + 1));
            }
        }
        require
    }
}

#[test]
fn reads_cuda_from_env_and_label() {
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": [
                "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin",
                "NVARCH=x86_64",
                "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=535,driver<536",
                "CUDA_VERSION=12.8.1",
                "CUDA_VERSION_EXTRA=x"
            ],
            "Labels": {"com.nvidia.cuda.version": "12.8.1", "maintainer": "NVIDIA CORPORATION"}
        }
    });
    let facts = facts_of_config(config.to_string().as_bytes(), "sha256:abc".to_owned());
    assert_eq!(
        facts,
        Ok(ImageConfigFacts {
            cuda_version: Some("12.8.1".to_owned()),
            require_cuda: Some(
                "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"
                    .to_owned()
            ),
            cuda_label: Some("12.8.1".to_owned()),
            digest: "sha256:abc".to_owned(),
            oversized: None,
        })
    );
}

#[test]
fn the_last_definition_wins_and_absent_is_none() {
    let config =
        json!({"config": {"Env": ["CUDA_VERSION=11.8.0", "CUDA_VERSION=12.4.1"], "Labels": null}});
    let facts = facts_of_config(config.to_string().as_bytes(), "sha256:d".to_owned());
    assert_eq!(facts.as_ref().map(|f| f.cuda_version.as_deref()), Ok(Some("12.4.1")));
    assert_eq!(facts.map(|f| f.cuda_label), Ok(None));
    for bare in [
        json!({"architecture": "amd64"}),
        json!({"config": null}),
        json!({"config": {"Env": null}}),
        json!({"config": {}}),
    ] {
        assert_eq!(
            facts_of_config(bare.to_string().as_bytes(), "sha256:e".to_owned()),
            Ok(ImageConfigFacts {
                cuda_version: None,
                require_cuda: None,
                cuda_label: None,
                digest: "sha256:e".to_owned(),
                oversized: None,
            }),
            "{bare}"
        );
    }
}

/// A value past [`MAX_VALUE_BYTES`] is not kept, nor are the others: the
/// facts say which was too long, and how long. One at the bound is kept
/// whole; an over-long definition that a later one replaces is no matter.
#[test]
fn a_value_longer_than_the_bound_is_kept_as_its_length_only() {
    let at_bound = "1".repeat(MAX_VALUE_BYTES);
    let over = format!("cuda>=12.8 {}", "x".repeat(MAX_VALUE_BYTES));
    let config = json!({"config": {
        "Env": ["CUDA_VERSION=13.0.2", format!("NVIDIA_REQUIRE_CUDA={over}"), format!("LONG={over}{over}")],
        "Labels": {"com.nvidia.cuda.version": at_bound},
    }});
    let facts = facts_of_config(config.to_string().as_bytes(), "sha256:g".to_owned());
    assert_eq!(
        facts,
        Ok(ImageConfigFacts {
            cuda_version: None,
            require_cuda: None,
            cuda_label: None,
            digest: "sha256:g".to_owned(),
            oversized: Some(OversizedValue { name: REQUIRE_CUDA_ENV, bytes: over.len() }),
        })
    );
    assert_eq!(
        facts.ok().and_then(|f| f.oversized).map(|o| o.to_string()),
        Some(
            "NVIDIA_REQUIRE_CUDA is 4,107 bytes long, more than the 4 KiB an image config value \
             may be"
                .to_owned()
        )
    );

    let label =
        json!({"config": {"Env": ["CUDA_VERSION=13.0.2"], "Labels": {CUDA_VERSION_LABEL: over}}});
    let facts = facts_of_config(label.to_string().as_bytes(), "sha256:h".to_owned());
    assert_eq!(
        facts.map(|f| (f.cuda_version, f.oversized.map(|o| o.name))),
        Ok((None, Some(CUDA_VERSION_LABEL)))
    );

    let replaced = json!({"config": {"Env": [format!("CUDA_VERSION={over}"), format!("CUDA_VERSION={at_bound}")]}});
    let facts = facts_of_config(replaced.to_string().as_bytes(), "sha256:i".to_owned());
    assert_eq!(
        facts.map(|f| (f.cuda_version.map(|v| v.len()), f.oversized)),
        Ok((Some(MAX_VALUE_BYTES), None))
    );
}

/// The JSON reader's error quotes the value it could not read, whole:
/// the reason keeps [`crate::registry::MAX_REASON_BYTES`] of it, and so does
/// the failure that says what was fetched before it.
#[test]
fn a_reason_that_quotes_a_long_value_is_cut() {
    let config = json!({"config": "c".repeat(1 << 20)});
    let reason = facts_of_config(config.to_string().as_bytes(), "sha256:j".to_owned())
        .err()
        .map(|err| err.to_string())
        .unwrap_or_default();
    assert!(
        reason.starts_with("image config is not JSON: invalid type: string \"ccc")
            && reason.ends_with("c…")
            && reason.len() < crate::registry::MAX_REASON_BYTES + 32,
        "{} bytes: {:.200}",
        reason.len(),
        reason
    );
    let failure = crate::registry::lookup::Failure::failed(reason).within(&"x".repeat(2000));
    assert!(
        failure.reason.starts_with("xxx")
            && failure.reason.ends_with(" bytes more)")
            && failure.reason.len() < crate::registry::MAX_REASON_BYTES + 32,
        "{} bytes: {:.200}",
        failure.reason.len(),
        failure.reason
    );
}

#[test]
fn escaped_names_and_odd_entries_read_as_written() {
    let config = br#"{"config": {"Env": ["CUDA\u005fVERSION=13.0.1", "no-equals", "=x", "NVIDIA_REQUIRE_CUDA="],
        "Labels": {"com.nvidia.cuda.version": "13.0.1", "other": {"nested": [1, 2]}}}}"#;
    let facts = facts_of_config(config, "sha256:f".to_owned());
    assert_eq!(
        facts.as_ref().map(|f| (
            f.cuda_version.as_deref(),
            f.require_cuda.as_deref(),
            f.cuda_label.as_deref()
        )),
        Ok((Some("13.0.1"), Some(""), Some("13.0.1")))
    );
}

#[test]
fn a_config_that_is_not_json_is_one_line() {
    for bytes in [
        &b"{\n\"config\": ["[..],
        b"{\"config\": {\"Env\": [1]}}",
        b"{\"config\": {\"Labels\": {\"com.nvidia.cuda.version\": 13}}}",
        b"",
    ] {
        let err = facts_of_config(bytes, "sha256:f".to_owned());
        assert!(
            err.as_ref().is_err_and(|err| err.to_string().starts_with("image config is not JSON")
                && !err.to_string().contains('\n')),
            "{err:?}"
        );
    }
}

const DIGEST: &str = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

#[test]
fn an_image_manifest_gives_its_config() {
    for media_type in [
        Some("application/vnd.oci.image.manifest.v1+json"),
        Some("application/vnd.docker.distribution.manifest.v2+json"),
        None,
    ] {
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": DIGEST, "size": 1234},
            "layers": [{"mediaType": "x", "digest": DIGEST, "size": 1}],
            "annotations": {"a": "b"},
        });
        assert_eq!(
            read_manifest(manifest.to_string().as_bytes()),
            Ok(Manifest::Image { config: Descriptor { digest: DIGEST.to_owned(), size: 1234 } }),
            "{media_type:?}"
        );
    }
}

#[test]
fn an_index_gives_its_entries() {
    let index = json!({
        "schemaVersion": 2,
        "manifests": [
            {"mediaType": "m", "digest": DIGEST, "size": 7,
             "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"},
             "annotations": {"x": "y"}},
            {"mediaType": "m", "digest": DIGEST, "size": 8},
        ],
    });
    assert_eq!(
        read_manifest(index.to_string().as_bytes()),
        Ok(Manifest::Index {
            manifests: vec![
                IndexEntry {
                    digest: DIGEST.to_owned(),
                    size: 7,
                    platform: Some(EntryPlatform {
                        os: "linux".to_owned(),
                        architecture: "arm64".to_owned(),
                        variant: Some("v8".to_owned()),
                    }),
                },
                IndexEntry { digest: DIGEST.to_owned(), size: 8, platform: None },
            ]
        })
    );
}

#[test]
fn what_is_not_a_manifest_says_why_on_one_line() {
    let cases = [
        (json!({"schemaVersion": 1, "fsLayers": []}), "schema version 1"),
        (json!({"config": {"digest": DIGEST, "size": 1}}), "no schemaVersion"),
        (json!({"schemaVersion": 2, "mediaType": "text/html"}), "is not an image manifest"),
        (
            json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json"}),
            "without \"manifests\"",
        ),
        (json!({"schemaVersion": 2}), "without \"config\""),
        (json!({"schemaVersion": 2, "config": {"digest": 5, "size": 1}}), "not a manifest"),
        (json!([1, 2, 3]), "not a manifest"),
    ];
    for (document, expected) in cases {
        let err = read_manifest(document.to_string().as_bytes()).map_err(|err| err.to_string());
        assert!(
            err.as_ref().is_err_and(|err| err.contains(expected) && !err.contains('\n')),
            "{document}: {err:?}"
        );
    }
    let deep = "[".repeat(100_000);
    assert!(read_manifest(deep.as_bytes()).is_err());
}

/// What a full `serde_json::Value` read of the same config says of CUDA: the
/// last `Env` entry of each name, and the label.
fn facts_read_in_full(
    config: &serde_json::Value,
) -> (Option<String>, Option<String>, Option<String>) {
    let section = &config["config"];
    let env_value = |name: &str| {
        section["Env"].as_array().and_then(|entries| {
            entries
                .iter()
                .filter_map(|entry| entry.as_str()?.strip_prefix(name)?.strip_prefix('='))
                .next_back()
                .map(str::to_owned)
        })
    };
    let label = section["Labels"][CUDA_VERSION_LABEL].as_str().map(str::to_owned);
    (env_value(CUDA_VERSION_ENV), env_value(REQUIRE_CUDA_ENV), label)
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn env_entry() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            Just(CUDA_VERSION_ENV.to_owned()),
            Just(REQUIRE_CUDA_ENV.to_owned()),
            Just("PATH".to_owned()),
            "[A-Z_]{1,12}",
        ];
        (name, "[ -~\u{e9}\"\\\\]{0,16}", any::<bool>()).prop_map(|(name, value, with_equals)| {
            if with_equals { format!("{name}={value}") } else { name }
        })
    }

    proptest! {
        /// The lean reader agrees with a full read of any config of this
        /// shape, however its env and labels are spelled.
        #[test]
        fn the_lean_reader_agrees_with_a_full_read(
            env in proptest::collection::vec(env_entry(), 0..8),
            label in proptest::option::of("[ -~]{0,12}"),
            other_label in "[a-z.]{1,12}",
        ) {
            let mut labels = serde_json::Map::new();
            labels.insert(other_label, json!("x"));
            if let Some(label) = &label {
                labels.insert(CUDA_VERSION_LABEL.to_owned(), json!(label));
            }
            let config = json!({"architecture": "amd64", "config": {"Env": env, "Labels": labels}});
            let facts = facts_of_config(config.to_string().as_bytes(), "sha256:p".to_owned())
                .map_err(|err| TestCaseError::fail(err.to_string()))?;
            let (cuda_version, require_cuda, cuda_label) = facts_read_in_full(&config);
            prop_assert_eq!(facts.cuda_version, cuda_version);
            prop_assert_eq!(facts.require_cuda, require_cuda);
            prop_assert_eq!(facts.cuda_label, cuda_label);
        }

        /// Any bytes: a manifest or a one-line reason, never a panic.
        #[test]
        fn any_bytes_read_or_say_why_on_one_line(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let errors = [
                read_manifest(&bytes).err().map(|err| err.to_string()),
                facts_of_config(&bytes, "sha256:p".to_owned()).err().map(|err| err.to_string()),
            ];
            for error in errors.into_iter().flatten() {
                prop_assert!(!error.contains('\n'), "{}", error);
            }
        }
    }
}

#[test]
fn an_index_of_too_many_entries_is_refused() {
    let entry = json!({"digest": format!("sha256:{}", "a".repeat(64)), "size": 1});
    let index = |n: usize| {
        json!({"schemaVersion": 2, "mediaType": INDEX_TYPES[0], "manifests": vec![entry.clone(); n]})
            .to_string()
    };
    match read_manifest(index(MAX_INDEX_ENTRIES).as_bytes()) {
        Ok(Manifest::Index { manifests }) => assert_eq!(manifests.len(), MAX_INDEX_ENTRIES),
        other => panic!("{other:?}"),
    }
    let refused = read_manifest(index(MAX_INDEX_ENTRIES + 1).as_bytes());
    let reason = refused.expect_err("more than the bound").to_string();
    assert!(reason.contains("an image index of more than 1024 entries"), "{reason}");
    // The array form serde also reads is bounded the same way.
    let tiny = format!("[2,null,null,[{}]]", vec![r#"["",0]"#; MAX_INDEX_ENTRIES + 1].join(","));
    assert!(read_manifest(tiny.as_bytes()).is_err());
}
