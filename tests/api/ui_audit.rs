//! Issue 44's audit log and keys' last use and expiry in a real headless Chromium at a
//! desktop's width (1366×900) and a phone's (390×844): an operator pauses a queue and
//! creates an expiring key in the UI, opens Audit from the navigation and finds both,
//! done by their UI session, filtered by action; the keys page shows each key's last use
//! and expiry. Nothing scrolls sideways on a phone; no console error.

use serde_json::json;

use crate::browser::Browser;
use crate::helpers::*;
use crate::ui_browser::screenshot_dir;
use crate::ui_second_pass::{DESKTOP, PHONE, overflow, resize, run};

#[tokio::test]
async fn ui_browser_the_audit_page_names_who_did_what() {
    let Some(browser) = Browser::start("ui_browser_audit").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("orders", "http://worker.example.com/hooks/orders", None)
        .await;
    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui/queue/orders")).await;
    browser.click("#pause").await;
    browser.wait_for("#resume").await;

    browser.goto(&app.url("/ui/keys")).await;
    browser.fill("#new-key-name", "nightly-export").await;
    run(
        &browser,
        "document.getElementById('new-key-role').value = 'reader';",
        vec![],
    )
    .await;
    browser.fill("#new-key-queues", "orders").await;
    browser.fill("#new-key-expiresAt", "30d").await;
    browser.click("#create-key").await;
    browser.wait_for(".flash.notice").await;
    let row = run(
        &browser,
        "const row = Array.from(document.querySelectorAll('table tbody tr'))\
           .find((r) => r.textContent.includes('nightly-export'));\
         return [row.querySelector('.key-last-used').textContent,\
                 row.querySelector('.key-expires').textContent,\
                 row.querySelector('.key-state').textContent.trim()];",
        vec![],
    )
    .await;
    assert_eq!(
        (&row[0], &row[2]),
        (&json!("never"), &json!("live")),
        "{row}"
    );
    assert!(
        [json!("in 29d"), json!("in 30d")].contains(&row[1]),
        "its expiry: {row}"
    );
    resize(&browser, PHONE).await;
    let wide = run(
        &browser,
        "return Array.from(document.querySelectorAll('body *'))\
         .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)\
         .slice(0, 8).map((e) => e.tagName + '#' + e.id + '.' + e.className + ' '\
           + Math.round(e.getBoundingClientRect().right));",
        vec![],
    )
    .await;
    let by = overflow(&browser).await;
    assert!(
        by <= 0,
        "the keys page fits a phone, the new key's answer too: {by} {wide}"
    );
    resize(&browser, DESKTOP).await;

    // Audit, from the navigation.
    browser.click("nav a[href='/ui/audit']").await;
    browser.wait_for("#audit").await;
    let entries = run(
        &browser,
        "return Array.from(document.querySelectorAll('#audit tbody tr')).map((r) =>\
           [r.cells[1].textContent, r.cells[1].title, r.cells[2].textContent, r.cells[3].textContent]);",
        vec![],
    )
    .await;
    let entries = entries.as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 3, "{entries:?}");
    let session = entries[0][1].as_str().unwrap_or_default().to_owned();
    assert!(session.starts_with("ui:"), "{entries:?}");
    assert_eq!(entries[0][2], "key.create", "newest first: {entries:?}");
    assert_eq!(
        entries[1][1],
        json!(session),
        "the same session: {entries:?}"
    );
    assert_eq!(
        (&entries[1][2], &entries[1][3]),
        (&json!("queue.pause"), &json!("orders"))
    );
    assert_eq!(
        (&entries[2][0], &entries[2][2]),
        (&json!("open server (no key)"), &json!("queue.create")),
        "the API's own call, on an open server"
    );
    browser.screenshot(&shots.join("audit.png")).await;

    // Filtered by action.
    run(
        &browser,
        "document.getElementById('audit-action').value = 'queue.pause';",
        vec![],
    )
    .await;
    browser.click("#audit-show").await;
    browser.wait_for_path_with("action=queue.pause").await;
    let actions = run(
        &browser,
        "return Array.from(document.querySelectorAll('#audit tbody tr'))\
           .map((r) => r.cells[2].textContent);",
        vec![],
    )
    .await;
    assert_eq!(actions, json!(["queue.pause"]));
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "the audit page fits a phone");
    browser.screenshot(&shots.join("phone-audit.png")).await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}
