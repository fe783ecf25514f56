//! The SDK's name validator and the host's independent one accept exactly the
//! same strings, and what they accept is what the design allows (docs/service-type.md, "Service names").

use guest_sdk::ServiceName;
use policy_host::service_name::CheckedName;
use proptest::prelude::*;
use proptest::test_runner::Config;

const ALLOWED_PUNCTUATION: &str = "._+:~-";

/// The rule written out once more, as a third opinion.
fn design_allows(name: &str) -> bool {
    (1..=255).contains(&name.len())
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ALLOWED_PUNCTUATION.contains(c))
}

fn check_agreement(name: &str) -> Result<(), TestCaseError> {
    let sdk = ServiceName::parse(name);
    let host = CheckedName::check(name);
    prop_assert_eq!(
        sdk.is_ok(),
        host.is_ok(),
        "SDK says {:?}, host says {:?}",
        sdk,
        host
    );
    prop_assert_eq!(sdk.is_ok(), design_allows(name), "SDK says {:?}", sdk);
    if let (Ok(sdk), Ok(host)) = (sdk, host) {
        prop_assert_eq!(sdk.as_str(), name);
        prop_assert_eq!(host.as_str(), name);
    }
    Ok(())
}

/// Mostly allowed characters, with a few that are not: the strings that sit
/// closest to the boundary.
fn near_valid_char() -> impl Strategy<Value = char> {
    prop_oneof![
        20 => proptest::char::ranges(vec!['a'..='z', 'A'..='Z', '0'..='9'].into()),
        6 => proptest::sample::select(ALLOWED_PUNCTUATION.chars().collect::<Vec<_>>()),
        1 => proptest::sample::select(vec![
            '@', ' ', '/', ';', '|', '&', '$', '\n', '\t', '\0', '\u{e9}', '\u{212a}', '\u{ff10}',
            '\u{1f600}', '#', '*', '\\', '\u{7f}',
        ]),
    ]
}

fn near_valid(len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    proptest::collection::vec(near_valid_char(), len).prop_map(|c| c.into_iter().collect())
}

proptest! {
    #![proptest_config(Config::with_cases(512))]

    #[test]
    fn validators_agree_on_arbitrary_strings(
        chars in proptest::collection::vec(any::<char>(), 0..300)
    ) {
        let name: String = chars.into_iter().collect();
        check_agreement(&name)?;
    }

    #[test]
    fn validators_agree_on_arbitrary_text_with_control_characters(
        name in "(?s)[\\x00-\\x20\\x7f-\\u{10ffff}a-z.-]{0,300}"
    ) {
        check_agreement(&name)?;
    }

    #[test]
    fn validators_agree_on_strings_of_the_allowed_alphabet_and_a_few_bad_characters(
        name in near_valid(0..300)
    ) {
        check_agreement(&name)?;
    }

    #[test]
    fn validators_agree_around_the_length_limit(
        name in near_valid(245..266),
        all_allowed in any::<bool>(),
    ) {
        let name = if all_allowed {
            name.chars().map(|c| if design_allows(&c.to_string()) { c } else { 'x' }).collect()
        } else {
            name
        };
        check_agreement(&name)?;
    }

    #[test]
    fn validators_agree_on_names_starting_with_a_dash(rest in near_valid(0..20)) {
        check_agreement(&format!("-{rest}"))?;
        check_agreement(&format!("--{rest}"))?;
    }
}

#[test]
fn validators_agree_on_the_documented_examples_and_the_edges() {
    for name in [
        "httpd",
        "nginx.service",
        "my-app_v2",
        "app@instance",
        "app; rm -rf /",
        "",
        "-",
        "a-",
        "~",
        "\u{e9}",
        "\u{212a}",
        "a\nb",
        "a\n",
        "abc\n",
        &"a".repeat(255),
        &"a".repeat(256),
        &format!("{}\u{e9}", "a".repeat(253)),
    ] {
        check_agreement(name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
    }
}
