use super::*;

#[test]
fn bounds_say_what_and_how_much() {
    assert_eq!(Bound::MANIFEST.exceeded().reason, "manifest larger than 4 MiB");
    assert_eq!(Bound::TOKEN.exceeded().reason, "token answer larger than 16 KiB");
    let declared = Bound::CONFIG.declared(213);
    assert_eq!(
        declared.map(|b| b.exceeded().reason),
        Ok("image config larger than the 213 bytes its descriptor declares".to_owned())
    );
    assert_eq!(
        Bound::CONFIG.declared(5 << 20).map_err(|f| (f.kind, f.reason)),
        Err((
            crate::registry::lookup::FailureKind::TooLarge,
            "image config of 5 MiB declared, larger than 4 MiB".to_owned()
        ))
    );
    // A negative size declares nothing readable.
    assert_eq!(Bound::CONFIG.declared(-1).map(|b| b.bytes), Ok(0));
    assert_eq!(human(4 << 10), "4 KiB");
    assert_eq!(human(1500), "1500 bytes");
}

/// Tokens as long as a token answer allows fill the cache's bytes
/// before its entries; ordinary ones fill its entries first.
#[test]
fn the_token_cache_is_bounded_in_bytes() {
    let mut tokens = token_cache();
    let far = Instant::now() + Duration::from_secs(60);
    let longest = "t".repeat(MAX_TOKEN_BYTES as usize);
    for n in 0..TOKEN_CACHE_ENTRIES {
        let key = ("registry.example".to_owned(), format!("team/image{n}"));
        tokens.put(key, (longest.clone(), far));
    }
    assert!(tokens.bytes() <= TOKEN_CACHE_BYTES, "{}", tokens.bytes());
    let kept = tokens.len();
    assert!((60..64).contains(&kept), "{kept} tokens of 16 KiB in 1 MiB");
    let ordinary = "t".repeat(1500);
    for n in 0..TOKEN_CACHE_ENTRIES {
        let key = ("registry-1.docker.io".to_owned(), format!("library/image{n}"));
        tokens.put(key, (ordinary.clone(), far));
    }
    assert_eq!(tokens.len(), TOKEN_CACHE_ENTRIES);
}
