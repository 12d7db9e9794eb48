use super::*;
use crate::registry::MAX_REASON_BYTES;

#[test]
fn answers_become_needs_or_fallbacks() {
    let lookups = vec![
        (
            "a".to_owned(),
            Lookup::Found(ImageConfigFacts::of(Some("13.0.2"), Some("cuda>=13.0"), None)),
        ),
        ("b".to_owned(), Lookup::Found(ImageConfigFacts::of(None, None, Some("12.8.1")))),
        ("c".to_owned(), Lookup::Found(ImageConfigFacts::of(None, None, None))),
        ("d".to_owned(), Lookup::Found(ImageConfigFacts::of(Some("thirteen"), None, None))),
        ("e".to_owned(), Lookup::Failed("e: 503 from the registry".to_owned())),
        ("f".to_owned(), Lookup::TimedOut),
    ];
    let mut details = Vec::new();
    let resolved = ResolvedImages::of_lookups(
        lookups,
        Duration::from_millis(500),
        |facts| needs_of(facts),
        &mut details,
    );
    let a = resolved.image_needs("a").unwrap_or_default();
    assert_eq!(a.cuda.map(|v| v.to_string()).as_deref(), Some("13.0"));
    assert!(a.require_cuda.is_some());
    assert!(resolved.image_needs("b").is_some_and(|b| b.cuda.is_some()));
    for table in ["c", "d", "e", "f"] {
        assert_eq!(resolved.image_needs(table), None, "{table}");
    }
    assert_eq!(resolved.fallback("c"), None);
    assert_eq!(resolved.fallback("d"), Some("unreadable image config"));
    assert_eq!(resolved.fallback("e"), Some("registry lookup failed"));
    assert_eq!(resolved.fallback("f"), Some("no registry answer in 500ms"));
    assert_eq!(details.len(), 3);
    assert!(details[1].contains("503"), "{details:?}");
}

/// A config whose value was too long to keep is unreadable, and says
/// which value and how long; a requirement quoted in a reason is cut.
#[test]
fn an_oversized_value_or_a_long_quote_is_a_short_reason() {
    let mut facts = ImageConfigFacts::of(Some("13.0.2"), None, None);
    if let Some(facts) = Arc::get_mut(&mut facts) {
        facts.oversized =
            Some(crate::registry::OversizedValue { name: REQUIRE_CUDA_ENV, bytes: 1_200_000 });
    }
    assert_eq!(
        needs_of(&facts),
        Err("NVIDIA_REQUIRE_CUDA is 1,200,000 bytes long, more than the 4 KiB an image \
                 config value may be"
            .to_owned())
    );
    let quoted = format!("cuda>=13.0 {}", "\u{1}".repeat(4000));
    let unreadable = ImageConfigFacts::of(Some("13.0.2"), Some(&quoted), None);
    let reason = needs_of(&unreadable).err().unwrap_or_default();
    assert!(
        reason.starts_with("NVIDIA_REQUIRE_CUDA \"cuda>=13.0 ")
            && reason.len() < MAX_REASON_BYTES + 32,
        "{} bytes: {reason:.200}",
        reason.len()
    );
}
