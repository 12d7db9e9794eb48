//! What a registry answers, from arbitrary bytes: the manifest and index
//! reader and the image config reader of registry mode, which read whatever
//! a registry named in a pod's image sends.
//!
//! - `read_manifest` returns a manifest or a one-line reason, and an
//!   index has no more entries than the bytes can hold;
//! - `facts_of_config` returns the CUDA facts or a one-line reason, and no
//!   fact is longer than the input (nothing is invented: JSON escapes only
//!   shorten what they spell) nor than `MAX_VALUE_BYTES`.

#![no_main]

use gpu_policy::registry::{
    MAX_INDEX_ENTRIES, MAX_VALUE_BYTES, Manifest, facts_of_config, read_manifest,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match read_manifest(data) {
        Ok(Manifest::Image { .. }) => {}
        // However small its entries (serde reads `["",0]` as one), an
        // index holds at most MAX_INDEX_ENTRIES.
        Ok(Manifest::Index { manifests }) => assert!(
            manifests.len() <= MAX_INDEX_ENTRIES && manifests.len() * 7 <= data.len(),
            "{} entries from {} bytes",
            manifests.len(),
            data.len()
        ),
        Err(reason) => assert!(!reason.contains('\n'), "the reason spans lines: {reason}"),
    }
    match facts_of_config(data, "sha256:fuzz".to_owned()) {
        Ok(facts) => {
            assert_eq!(facts.digest, "sha256:fuzz");
            for fact in [&facts.cuda_version, &facts.require_cuda, &facts.cuda_label]
                .into_iter()
                .flatten()
            {
                assert!(
                    fact.len() <= data.len() && fact.len() <= MAX_VALUE_BYTES,
                    "{fact:?} is longer than the input or the bound"
                );
            }
        }
        Err(reason) => assert!(!reason.contains('\n'), "the reason spans lines: {reason}"),
    }
});
