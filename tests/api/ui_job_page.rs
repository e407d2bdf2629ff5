//! The job page stays small whatever the payload: a 256 KiB payload 1 000 levels deep (the
//! most the parser takes) renders as a page of a small multiple of 64 KiB (not 260 MB), the
//! server's memory stays flat over several views, and the page's refresh answers the one
//! element it swaps.

use crate::helpers::{BinaryApp, DEADLINE};

/// A JSON object of about `bytes` bytes, `depth` arrays deep.
fn deep_payload(depth: usize, bytes: usize) -> String {
    let filler = "x".repeat(bytes - 2 * depth - 12);
    format!(
        r#"{{"d":{}"{filler}"{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// The server's resident memory, in bytes (Linux `/proc`).
fn rss_bytes(server: &BinaryApp) -> u64 {
    let pid = server.child.id().expect("the server runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib * 1024
}

#[tokio::test]
async fn a_deep_256_kib_payload_renders_as_a_small_page_and_memory_stays_flat() {
    let dir = tempfile::tempdir().unwrap();
    let server = BinaryApp::start(&dir.path().join("hookq.db"), &[("HOOKQ_DISPATCH", "off")]).await;
    server
        .create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let payload = deep_payload(999, 256 * 1024);
    let enqueued = server.enqueue_raw("q", payload.as_bytes()).await;
    let id = enqueued.expect(201)["id"].as_str().unwrap().to_owned();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(DEADLINE)
        .build()
        .unwrap();
    let page_url = server.url(&format!("/ui/queue/q/job/{id}"));
    let first = http.get(&page_url).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let page = first.text().await.unwrap();
    assert!(
        page.len() < 3 * 64 * 1024,
        "the page is {} bytes for a {}-byte payload",
        page.len(),
        payload.len()
    );
    assert!(page.contains(r#"id="payload-truncated""#), "says it is cut");
    assert!(page.contains("payload.json"), "links to the whole payload");
    // Four more views, as four open tabs would: memory stays near where it was.
    let before = rss_bytes(&server);
    for _ in 0..4 {
        let view = http.get(&page_url).send().await.unwrap();
        assert!(view.text().await.unwrap().len() < 3 * 64 * 1024);
    }
    let grown = rss_bytes(&server).saturating_sub(before);
    assert!(grown < 64 << 20, "RSS grew by {} MiB", grown >> 20);
    // The whole payload, exactly as stored.
    let raw = http
        .get(format!("{page_url}/payload.json"))
        .send()
        .await
        .unwrap();
    assert!(
        raw.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(raw.text().await.unwrap(), payload);
}

#[tokio::test]
async fn the_job_pages_refresh_answers_exactly_the_element_it_swaps() {
    let dir = tempfile::tempdir().unwrap();
    let server = BinaryApp::start(&dir.path().join("hookq.db"), &[("HOOKQ_DISPATCH", "off")]).await;
    server
        .create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let id = server
        .enqueue_ok("q", &serde_json::json!({"big": "y".repeat(5000)}))
        .await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let text_of = |path: String| {
        let request = http.get(server.url(&path));
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let page = text_of(format!("/ui/queue/q/job/{id}")).await;
    // The page polls `_details` and swaps #job-live (outerHTML) with what it answers.
    let live_start = page
        .find(r#"<div id="job-live""#)
        .expect("the live element");
    assert!(
        page[live_start..].contains("/_details"),
        "a READY job's page refreshes"
    );
    let fragment = text_of(format!("/ui/queue/q/job/{id}/_details")).await;
    let fragment = fragment.trim();
    assert!(fragment.starts_with(r#"<div id="job-live""#), "{fragment}");
    assert!(
        fragment.ends_with("</div>"),
        "one element, nothing after it"
    );
    assert_eq!(fragment.matches(r#"id="job-live""#).count(), 1);
    assert!(
        !fragment.contains(r#"id="payload""#),
        "the payload is not re-sent"
    );
    assert!(!fragment.contains(&"y".repeat(5000)));
}
