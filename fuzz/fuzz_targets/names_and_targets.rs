//! `hookq::model::QueueName::parse` and `hookq::model::Target::parse` on arbitrary text.
//!
//! QueueName: never panics; accepts exactly the inputs whose ASCII-lowercased form matches
//! `^[a-z0-9~_-]{1,100}$` (an exact oracle, both ways); an accepted name is that form and
//! re-parses to itself.
//!
//! Target: never panics; an accepted target is http or https with a non-empty host and no
//! credentials, and its stored form (`as_str()`, what the store writes and reads back with
//! `Target::from_stored` = `Target::parse` at start-up) parses again to the same target.
#![no_main]

use hookq::model::{QueueName, Target};
use libfuzzer_sys::fuzz_target;

fn is_valid_name(s: &str) -> bool {
    (1..=100).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"~_-".contains(&b))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    let lowered = text.to_ascii_lowercase();
    match QueueName::parse(text) {
        Ok(name) => {
            assert!(
                is_valid_name(name.as_str()),
                "accepted {text:?} as {:?}",
                name.as_str()
            );
            assert_eq!(name.as_str(), lowered);
            assert_eq!(QueueName::parse(name.as_str()).as_ref(), Ok(&name));
        }
        Err(_) => assert!(!is_valid_name(&lowered), "refused a valid name {text:?}"),
    }

    if let Ok(target) = Target::parse(text) {
        let url = target.url();
        assert!(
            matches!(url.scheme(), "http" | "https"),
            "scheme of {text:?}"
        );
        assert!(
            url.host_str().is_some_and(|h| !h.is_empty()),
            "host of {text:?}"
        );
        assert!(
            url.username().is_empty() && url.password().is_none(),
            "credentials in {text:?}"
        );
        // The stored form must read back at start-up (a bug this target found: the length
        // limit once applied only to the raw text; see fuzz/README.md).
        let stored = target.as_str();
        match Target::parse(stored) {
            Ok(again) => assert_eq!(again, target, "{text:?} -> {stored:?}"),
            Err(e) => panic!(
                "accepted target {text:?} ({} bytes) is stored as {stored:?} ({} bytes), \
                 which Target::parse refuses: {e}",
                text.len(),
                stored.len()
            ),
        }
    }
});
