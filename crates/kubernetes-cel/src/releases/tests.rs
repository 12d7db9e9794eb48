use super::*;

fn names(expression: &str, minor: u32) -> Vec<String> {
    refused(expression, minor).expect("parses").iter().map(ToString::to_string).collect()
}

#[test]
fn a_function_is_refused_by_the_release_that_introduced_it() {
    let expression = "lists.range(size(object.spec.containers)).map(i, [i]).flatten()";
    assert_eq!(
        names(expression, 34),
        ["`flatten` (from Kubernetes 1.35)", "`lists.range` (from Kubernetes 1.35)"]
    );
    assert!(names(expression, 35).is_empty());
}

#[test]
fn nested_calls_and_comprehensions_are_read() {
    let expression = "object.items.exists(x, {'a': [semver(x.v)]}.a.size() > 0) \
                          && quantity('1').isGreaterThan(quantity('0'))";
    assert_eq!(names(expression, 33), ["`semver` (from Kubernetes 1.34)"]);
    assert!(names(expression, 34).is_empty());
}

#[test]
fn each_function_is_named_once() {
    assert_eq!(names("[1].flatten().flatten() == [2].flatten()", 33).len(), 1);
}

#[test]
fn a_function_kubernetes_lacks_is_refused_by_every_release() {
    assert_eq!(names("'abc'.reverse()", 37), ["`reverse` (not in Kubernetes' CEL)"]);
}

#[test]
fn standard_functions_and_macros_are_always_accepted() {
    assert!(
        names("size(object.a) > 0 && object.b.all(x, x.matches('^a')) && int('1') == 1", 32)
            .is_empty()
    );
}

#[test]
fn an_expression_that_does_not_parse_is_an_error() {
    assert!(refused("object.(", 37).is_err());
}
