use super::*;
use crate::policy::testing::apply;
use serde_json::json;

/// The pointer is the one `push_back` builds token by token, escapes
/// included.
#[test]
fn a_pointer_below_is_the_pointer_pushed_token_by_token() {
    let bases = [PointerBuf::root(), PointerBuf::from_tokens(["spec", "template"])];
    let steps: [&[Step<'_>]; 5] = [
        &[],
        &[Step::Key("containers"), Step::Index(0)],
        &[Step::Key("env"), Step::Key("-")],
        &[Step::Key("a/b~c"), Step::Index(usize::MAX), Step::Key("")],
        &[Step::Key("annotations"), Step::Key("gpu-policy.io/mutations")],
    ];
    for base in &bases {
        for steps in steps {
            let mut pushed = base.clone();
            for step in steps {
                match step {
                    Step::Key(key) => pushed.push_back(*key),
                    Step::Index(index) => pushed.push_back(*index),
                }
            }
            let below = pointer_below(base, steps.iter().copied());
            assert_eq!(below, pushed, "{base} {steps:?}");
        }
    }
    assert_eq!(
        pointer_below(&bases[1], [Step::Key("a/b~c"), Step::Index(7)]).as_str(),
        "/spec/template/a~1b~0c/7"
    );
}

/// Only an `add` of the metadata itself or of its whole annotations
/// map adds the annotations; a key inside them, a sibling whose name
/// starts the same, or another operation does not.
#[test]
fn only_adding_the_metadata_or_the_whole_annotations_adds_annotations() {
    let metadata = Pointer::from_static("/spec/template/metadata");
    let cases = [
        ("/spec/template/metadata", true),
        ("/spec/template/metadata/annotations", true),
        ("/spec/template/metadata/annotations/a", false),
        ("/spec/template/metadata/annotationsX", false),
        ("/spec/template/metadataX", false),
        ("/spec/template/metadata/labels", false),
        ("/metadata/annotations", false),
    ];
    for (path, adds) in cases {
        let path = PointerBuf::parse(path).unwrap_or_default();
        let added = add(path.clone(), Value::Null);
        assert_eq!(adds_annotations(&[added], metadata), adds, "{path}");
    }
    let replaced = PatchOperation::Replace(json_patch::ReplaceOperation {
        path: metadata.to_buf(),
        value: Value::Null,
    });
    assert!(!adds_annotations(&[replaced], metadata));
}

/// The bytes are the patch encoded, up to the budget and not past it.
#[test]
fn a_patch_is_encoded_up_to_its_budget() {
    let operations: Vec<PatchOperation> = (0..100)
        .map(|at| {
            let path = pointer_below(
                Pointer::root(),
                [Step::Key("spec"), Step::Key("containers"), Step::Index(at)],
            );
            add(path, Value::String("void".to_owned()))
        })
        .collect();
    let encoded = serde_json::to_vec(&operations).unwrap_or_default();
    let budget = encoded.len();
    assert_eq!(encoded_within(&operations, budget).as_ref(), Some(&encoded));
    assert_eq!(encoded_within(&operations, usize::MAX).as_ref(), Some(&encoded));
    assert_eq!(encoded_within(&operations, budget - 1), None);
    assert_eq!(encoded_within(&[], 2), Some(b"[]".to_vec()));
}

fn at(path: &str) -> PointerBuf {
    PointerBuf::parse(path).unwrap()
}

#[test]
fn a_second_add_of_an_array_appends_what_it_adds() {
    let earlier = vec![add(at("/spec/tolerations"), json!([{"key": "a"}]))];
    let later = vec![
        add(at("/spec/tolerations"), json!([{"key": "a"}, {"key": "b"}])),
        add(at("/spec/runtimeClassName"), json!("nvidia")),
    ];
    let composed = composed(&earlier, later);
    assert_eq!(
        composed,
        vec![
            add(at("/spec/tolerations/-"), json!({"key": "b"})),
            add(at("/spec/runtimeClassName"), json!("nvidia")),
        ]
    );
    let mut patch = earlier;
    patch.extend(composed);
    let patched = apply(&json!({"spec": {}}), &patch);
    assert_eq!(patched["spec"]["tolerations"], json!([{"key": "a"}, {"key": "b"}]));
}

#[test]
fn an_append_of_an_item_already_appended_is_left_out() {
    let earlier = vec![add(at("/spec/tolerations/-"), json!({"key": "a"}))];
    let later = vec![
        add(at("/spec/tolerations/-"), json!({"key": "a"})),
        add(at("/spec/tolerations/-"), json!({"key": "b"})),
    ];
    assert_eq!(
        composed(&earlier, later),
        vec![add(at("/spec/tolerations/-"), json!({"key": "b"}))]
    );
}

#[test]
fn operations_on_other_paths_are_kept_as_they_are() {
    let earlier = vec![add(at("/spec/tolerations"), json!([{"key": "a"}]))];
    let later = vec![
        add(at("/spec/containers/0/env"), json!([{"name": "A"}])),
        add(at("/spec/containers/0/env/-"), json!({"name": "A"})),
    ];
    assert_eq!(composed(&earlier, later.clone()), later);
    // Nothing earlier: kept.
    let later = vec![add(at("/spec/tolerations"), json!([{"key": "a"}]))];
    assert_eq!(composed(&[], later.clone()), later);
}
