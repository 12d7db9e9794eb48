use super::*;

#[test]
fn string_literals_escape_quotes_and_backslashes() {
    assert_eq!(string("a'b\\c"), "'a\\'b\\\\c'");
    assert_eq!(string_list(["x", "y"]), "['x', 'y']");
}

#[test]
fn messages_are_the_templates_words_around_the_slots() {
    let template =
        MessageTemplate::new("{containers} must not ask for more than {maximum} {resource}");
    assert_eq!(
        full_message(
            template,
            &[
                ("containers", Fill::cel("variables.who")),
                ("maximum", Fill::words(8)),
                ("resource", Fill::cel("k + 's'")),
            ]
        ),
        "'gpu-policy: ' + variables.who + ' must not ask for more than 8 ' + (k + 's')"
    );
    assert_eq!(message(template, &[]), format!("'{}'", template.text()));
}

#[test]
fn resource_patterns_become_exact_names_or_anchored_regexes() {
    let settings = Settings::default();
    let test = gpu_resource(&settings, "k");
    assert!(test.contains("k == 'nvidia.com/gpu'"), "{test}");
    assert!(test.contains("k.matches('^nvidia[.]com/mig-.*$')"), "{test}");
}
