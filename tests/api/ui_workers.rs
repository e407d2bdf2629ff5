//! Issue 44's pull workers in view, in a real headless Chromium at a desktop's width
//! (1366×900) and a phone's (390×844): an operator opens Workers from the navigation and
//! sees the leases held (job linked, since when, until when, by whom, extended) and the
//! requests waiting per node and queue; a lease taken meanwhile appears with the 2 s
//! refresh; a pull queue's page links to its workers. Nothing scrolls sideways on a phone;
//! no console error.

use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::*;
use crate::ui_browser::screenshot_dir;
use crate::ui_second_pass::{DESKTOP, PHONE, overflow, resize, run};

async fn lease(app: &TestApp, queue: &str, body: Value) -> Vec<Value> {
    app.call(
        Method::POST,
        &format!("/queue/{queue}/_lease"),
        Some(body.to_string().as_bytes()),
    )
    .await
    .expect(200)["jobs"]
        .as_array()
        .expect("jobs")
        .clone()
}

#[tokio::test]
async fn ui_browser_the_workers_page_shows_leases_held_and_requests_waiting() {
    let Some(browser) = Browser::start("ui_browser_workers").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let app = spawn_app(|_| {}).await;
    for name in ["invoices", "thumbnails"] {
        app.put_queue(name, &json!({})).await.expect(201);
    }
    for n in 0..4 {
        app.enqueue_ok("invoices", &payload(n)).await;
    }
    let held = lease(&app, "invoices", json!({"max": 2, "visibility": "10m"})).await;
    let extended = &held[0];
    let id = extended["id"].as_str().expect("id").to_owned();
    app.call(
        Method::POST,
        &format!("/queue/invoices/{id}/_extend"),
        Some(
            json!({"leaseId": extended["leaseId"], "visibility": "1h"})
                .to_string()
                .as_bytes(),
        ),
    )
    .await
    .expect(200);
    // A worker waiting for a thumbnail, until the route reports it.
    let waiting = {
        let api = app.api.clone();
        tokio::spawn(async move {
            api.call(
                Method::POST,
                "/queue/thumbnails/_lease",
                Some(br#"{"wait":"30s"}"#.as_slice()),
            )
            .await
        })
    };
    eventually("the waiting request reported", || async {
        let page = app.get("/admin/leases").await.expect(200);
        (page["waiting"].as_array().is_some_and(|w| !w.is_empty())).then_some(())
    })
    .await;

    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui")).await;
    browser.click("nav a[href='/ui/workers']").await;
    browser.wait_for("#leases").await;
    let waiting_rows = run(
        &browser,
        "return Array.from(document.querySelectorAll('#waiting tbody tr'))\
           .map((r) => Array.from(r.cells).map((c) => c.textContent.trim()));",
        vec![],
    )
    .await;
    assert_eq!(
        (&waiting_rows[0][1], &waiting_rows[0][2]),
        (&json!("thumbnails"), &json!("1")),
        "{waiting_rows}"
    );
    let node = waiting_rows[0][0].as_str().expect("node");
    assert!(node.contains("this node"), "{waiting_rows}");
    assert_eq!(
        waiting_rows.as_array().map(Vec::len),
        Some(1),
        "{waiting_rows}"
    );
    let row = run(
        &browser,
        "const row = document.getElementById('lease-' + arguments[0]);\
         return [row.querySelector('a').getAttribute('href'),\
                 row.querySelector('.lease-holder').textContent.trim(),\
                 row.cells[6].textContent.trim(), row.cells[2].textContent.trim(),\
                 row.querySelector('.lease-until').textContent.trim()];",
        vec![json!(id)],
    )
    .await;
    assert_eq!(
        row,
        json!([
            format!("/ui/queue/invoices/job/{id}"),
            "open server (no key)",
            "extended",
            "1",
            "in 59m"
        ])
    );
    assert_eq!(
        run(
            &browser,
            "return document.querySelectorAll('#leases tbody tr').length;",
            vec![]
        )
        .await,
        2
    );
    // A lease taken now shows with the next refresh.
    let third = lease(&app, "invoices", json!({"visibility": "10m"})).await;
    let third = third[0]["id"].as_str().expect("id").to_owned();
    browser.wait_for(&format!("#lease-{third}")).await;
    browser.screenshot(&shots.join("workers.png")).await;

    resize(&browser, PHONE).await;
    let by = overflow(&browser).await;
    assert!(by <= 0, "the workers page fits a phone: {by}");
    browser.screenshot(&shots.join("phone-workers.png")).await;
    resize(&browser, DESKTOP).await;

    // A pull queue's page links to its workers.
    browser.goto(&app.url("/ui/queue/invoices")).await;
    browser.click("#workers-link").await;
    browser.wait_for_path_with("/ui/workers").await;
    browser.wait_for("#leases").await;
    assert_eq!(browser.text_of("h1").await, "Workers of invoices");
    assert_eq!(
        run(
            &browser,
            "return document.querySelectorAll('#waiting').length;",
            vec![]
        )
        .await,
        0,
        "no worker waits for an invoice"
    );
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    waiting.abort();
    browser.close().await;
}
