//! The browser harness: a real headless Chromium driven through chromedriver (WebDriver,
//! via `fantoccini`) for the tests of the web UI ([`Browser`]), and the test that proves the
//! harness itself sees pages, forms, confirm dialogs and the browser's console errors.
//!
//! Every [`Browser`] owns its own chromedriver (on a port it picks itself), its own Chromium
//! and a fresh directory for everything Chromium writes (profile, temporary files, crash
//! reports); dropping it kills the driver's whole process group, so no browser outlives a
//! failed test. Without the binaries the browser tests skip, except in CI
//! (`CI=true`), where they fail.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Method;
use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long any wait on the browser may take before the test fails: page loads, elements
/// appearing, dialogs opening. Generous, because CI machines are slow and Chromium is big.
pub const WAIT: Duration = Duration::from_secs(20);

/// How often the waits that have no event to wait on ask the browser again.
const POLL: Duration = Duration::from_millis(50);

/// The stand-in message [`Browser::console_errors`] logs to know the log has caught up.
const BARRIER: &str = "hookq-browser-log-barrier-";

/// A headless Chromium session for one test. Fields drop in order: the WebDriver client,
/// then the driver (killing the browser), then the browser's directory.
pub struct Browser {
    client: Client,
    _driver: Driver,
    _home: TempDir,
    barriers: AtomicU64,
}

impl Browser {
    /// Starts chromedriver and headless Chromium. When either binary is missing: with
    /// `CI=true` this panics (CI must run the browser tests); otherwise it prints a "skipped"
    /// line to stderr and returns `None`, and the test should return.
    pub async fn start(test_name: &str) -> Option<Browser> {
        let (driver_bin, chromium_bin) = match (find_chromedriver(), find_chromium()) {
            (Some(driver), Some(chromium)) => (driver, chromium),
            (driver, chromium) => {
                let missing: Vec<&str> = [
                    driver.is_none().then_some("chromedriver (on PATH)"),
                    chromium
                        .is_none()
                        .then_some("chromium (/usr/lib/chromium/chromium or on PATH)"),
                ]
                .into_iter()
                .flatten()
                .collect();
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!(
                        "{test_name} needs chromium and chromedriver (Debian packages chromium, \
                         chromium-driver) and CI=true, so it may not skip; missing: {}. \
                         .ci/run installs them.",
                        missing.join(", ")
                    );
                }
                eprintln!(
                    "skipped: {test_name} needs chromium and chromedriver (Debian packages \
                     chromium, chromium-driver)"
                );
                crate::skipped::record("Chromium (apt-get install chromium chromium-driver)");
                return None;
            }
        };

        let home = TempDir::new().expect("create a directory for the browser");
        let driver = Driver::spawn(&driver_bin, home.path()).await;
        let caps = capabilities(&chromium_bin, &home.path().join("profile"));
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", driver.port))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{test_name}: chromedriver did not start a Chromium session ({e}); \
                     chromium: {}; driver output:\n{}",
                    chromium_bin.display(),
                    driver.output()
                )
            });
        Some(Browser {
            client,
            _driver: driver,
            _home: home,
            barriers: AtomicU64::new(0),
        })
    }

    /// The WebDriver client, for whatever the helpers below do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Loads `url` and waits for the page to finish loading.
    pub async fn goto(&self, url: &str) {
        if let Err(e) = self.client.goto(url).await {
            panic!("browser: loading {url} failed: {e}");
        }
    }

    /// Waits (up to [`WAIT`]) for an element matching `css`. On timeout the panic names the
    /// selector, the current URL and the start of the page's text.
    pub async fn wait_for(&self, css: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(CmdError::WaitTimeout) => panic!(
                "browser: no element matches {css:?} after {WAIT:?}\n{}",
                self.page_context().await
            ),
            Err(e) => panic!(
                "browser: waiting for {css:?} failed: {e}\n{}",
                self.page_context().await
            ),
        }
    }

    /// Waits for `css`, then clicks it.
    pub async fn click(&self, css: &str) {
        let element = self.wait_for(css).await;
        if let Err(e) = element.click().await {
            panic!(
                "browser: clicking {css:?} failed: {e}\n{}",
                self.page_context().await
            );
        }
    }

    /// Waits for `css`, clears it and types `text` into it.
    pub async fn fill(&self, css: &str, text: &str) {
        let element = self.wait_for(css).await;
        if let Err(e) = element.clear().await {
            panic!(
                "browser: clearing {css:?} failed: {e}\n{}",
                self.page_context().await
            );
        }
        if let Err(e) = element.send_keys(text).await {
            panic!(
                "browser: typing into {css:?} failed: {e}\n{}",
                self.page_context().await
            );
        }
    }

    /// Waits for `css` and returns its rendered text.
    pub async fn text_of(&self, css: &str) -> String {
        let element = self.wait_for(css).await;
        element
            .text()
            .await
            .unwrap_or_else(|e| panic!("browser: reading the text of {css:?} failed: {e}"))
    }

    /// The path and query (`/a/b?c=d`) of the page the browser shows.
    pub async fn current_path(&self) -> String {
        let url = self
            .client
            .current_url()
            .await
            .unwrap_or_else(|e| panic!("browser: reading the current URL failed: {e}"));
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        }
    }

    /// Waits (up to [`WAIT`]) until the page the browser shows has `part` in its path and
    /// query: after a form's submit, the old page may still answer a selector both have.
    pub async fn wait_for_path_with(&self, part: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let path = self.current_path().await;
            if path.contains(part) {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "browser: still on {path} after {WAIT:?}, not a page with {part:?}\n{}",
                    self.page_context().await
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits (up to [`WAIT`]) for a JavaScript `confirm()` dialog (what `hx-confirm` opens),
    /// accepts it and returns its text.
    pub async fn accept_confirm(&self) -> String {
        let deadline = Instant::now() + WAIT;
        let text = loop {
            match self.client.get_alert_text().await {
                Ok(text) => break text,
                Err(e) if e.is_no_such_alert() && Instant::now() < deadline => {
                    tokio::time::sleep(POLL).await;
                }
                Err(e) if e.is_no_such_alert() => panic!(
                    "browser: no confirm dialog opened within {WAIT:?}\n{}",
                    self.page_context().await
                ),
                Err(e) => panic!("browser: reading the confirm dialog failed: {e}"),
            }
        };
        if let Err(e) = self.client.accept_alert().await {
            panic!("browser: accepting the confirm dialog {text:?} failed: {e}");
        }
        text
    }

    /// The SEVERE entries of the browser's console log since the last call: script errors,
    /// Content Security Policy violations, resources that failed to load (any 4xx or 5xx).
    ///
    /// Everything the page logged before this call is included: the call logs a marker of
    /// its own and reads the log until the marker arrives. (While a dialog is open no script
    /// can run; then it reads what the log holds.)
    pub async fn console_errors(&self) -> Vec<String> {
        let marker = format!("{BARRIER}{}", self.barriers.fetch_add(1, Ordering::Relaxed));
        let marked = self
            .client
            .execute("console.error(arguments[0])", vec![json!(marker)])
            .await
            .is_ok();
        let deadline = Instant::now() + WAIT;
        let mut errors = Vec::new();
        loop {
            let mut caught_up = !marked;
            for (level, message) in self.browser_log().await {
                if message.contains(&marker) {
                    caught_up = true;
                } else if level == "SEVERE" && !message.contains(BARRIER) {
                    errors.push(message);
                }
            }
            if caught_up {
                return errors;
            }
            if Instant::now() >= deadline {
                panic!(
                    "browser: the console log did not show the marker {marker:?} within \
                     {WAIT:?}; errors so far: {errors:?}"
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Saves a PNG of the viewport to `path`, creating its parent directories.
    pub async fn screenshot(&self, path: &Path) {
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("browser: taking a screenshot failed: {e}"));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("creating {}: {e}", parent.display()));
        }
        std::fs::write(path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    /// Ends the WebDriver session (Chromium quits) and stops the driver.
    pub async fn close(self) {
        let Browser {
            client,
            _driver: driver,
            _home: home,
            ..
        } = self;
        if let Err(e) = client.close().await {
            panic!(
                "browser: ending the session failed: {e}; driver output:\n{}",
                driver.output()
            );
        }
        drop(driver);
        drop(home);
    }

    /// `(level, message)` of every entry in the browser's log since the last read (reading
    /// empties it). chromedriver's legacy log endpoint; fantoccini has no call for it.
    async fn browser_log(&self) -> Vec<(String, String)> {
        let entries = self
            .client
            .issue_cmd(BrowserLog)
            .await
            .unwrap_or_else(|e| panic!("browser: reading the console log failed: {e}"));
        let Value::Array(entries) = entries else {
            panic!("browser: the console log is not a list: {entries}");
        };
        entries
            .iter()
            .map(|entry| {
                let field = |name: &str| entry[name].as_str().unwrap_or_default().to_owned();
                (field("level"), field("message"))
            })
            .collect()
    }

    /// What a failed wait reports: the current URL and the start of the page's text.
    async fn page_context(&self) -> String {
        let url = match self.client.current_url().await {
            Ok(url) => url.to_string(),
            Err(e) => format!("(unknown: {e})"),
        };
        let text = match self.client.find(Locator::Css("body")).await {
            Ok(body) => body
                .text()
                .await
                .unwrap_or_else(|e| format!("(unknown: {e})")),
            Err(e) => format!("(no body: {e})"),
        };
        let excerpt: String = text.chars().take(2000).collect();
        format!("current URL: {url}\npage text (first 2000 characters):\n{excerpt}")
    }
}

/// chromedriver's legacy `POST /session/{id}/se/log` with `{"type":"browser"}`: the console
/// entries (`level`, `message`, `timestamp`) since the last read.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        let session = session_id.expect("the browser log needs a session");
        base_url.join(&format!("session/{session}/se/log"))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (Method, Option<String>) {
        (Method::POST, Some(json!({ "type": "browser" }).to_string()))
    }
}

/// Headless Chromium with a fresh profile, nothing talking to the network on its own, every
/// console message logged, page loads bounded by [`WAIT`], and no dialog ever dismissed
/// behind a test's back (a command while one is open fails with "unexpected alert open").
fn capabilities(chromium: &Path, profile: &Path) -> Capabilities {
    let caps = json!({
        "browserName": "chrome",
        "unhandledPromptBehavior": "ignore",
        // A page that never finishes loading fails `goto` within WAIT, not chromedriver's 300 s.
        "timeouts": { "pageLoad": WAIT.as_millis() as u64, "script": WAIT.as_millis() as u64 },
        "goog:chromeOptions": {
            "binary": chromium,
            "args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--window-size=1024,768",
                format!("--user-data-dir={}", profile.display()),
            ],
        },
        "goog:loggingPrefs": { "browser": "ALL" },
    });
    let Value::Object(caps) = caps else {
        unreachable!("capabilities are an object")
    };
    caps
}

/// `name` in a directory of `PATH`, if it is an executable file there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn find_chromedriver() -> Option<PathBuf> {
    on_path("chromedriver")
}

/// The real browser binary first: Debian's `/usr/bin/chromium` is a wrapper script that adds
/// flags from `/etc/chromium.d`.
fn find_chromium() -> Option<PathBuf> {
    let real = Path::new("/usr/lib/chromium/chromium");
    if is_executable(real) {
        return Some(real.to_owned());
    }
    on_path("chromium")
}

/// A running chromedriver, the leader of its own process group (Chromium and its helpers
/// join it). Dropping it kills the whole group.
struct Driver {
    port: u16,
    pgid: u32,
    _child: tokio::process::Child,
    output: Arc<Mutex<String>>,
}

impl Driver {
    /// Starts chromedriver on a port it picks and learns the port from its stdout. It and
    /// the browser keep their temporary files, configuration and cache under `home`.
    ///
    /// With `--port=0` chromedriver picks a port on one address family, then binds the
    /// same number on the other, which another process may hold: it then exits ("Address
    /// already in use") before reporting a port, and is started again, a few times at most.
    async fn spawn(bin: &Path, home: &Path) -> Driver {
        const STARTS: usize = 5;
        for _ in 1..STARTS {
            if let Ok(driver) = Self::start_once(bin, home).await {
                return driver;
            }
        }
        Self::start_once(bin, home).await.unwrap_or_else(|output| {
            panic!(
                "chromedriver ({}) exited without reporting its port {STARTS} times; \
                 output:\n{output}",
                bin.display()
            )
        })
    }

    /// One start of chromedriver; its output if it exits before reporting its port.
    async fn start_once(bin: &Path, home: &Path) -> Result<Driver, String> {
        let dir = |name: &str| {
            let dir = home.join(name);
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
            dir
        };
        let mut child = tokio::process::Command::new(bin)
            .arg("--port=0")
            .env("TMPDIR", dir("tmp"))
            .env("XDG_CONFIG_HOME", dir("config"))
            .env("XDG_CACHE_HOME", dir("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let pgid = child.id().expect("a just-spawned chromedriver has a pid");
        let output = Arc::new(Mutex::new(String::new()));
        let (port_tx, port_rx) = oneshot::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        tokio::spawn(drain(stdout, output.clone(), Some(port_tx)));
        tokio::spawn(drain(stderr, output.clone(), None));
        // From here on the guard owns the process group, so a panic below still kills it.
        let mut driver = Driver {
            port: 0,
            pgid,
            _child: child,
            output,
        };
        driver.port = match tokio::time::timeout(WAIT, port_rx).await {
            Ok(Ok(port)) => port,
            Ok(Err(_)) => return Err(driver.output()),
            Err(_) => panic!(
                "chromedriver ({}) did not report its port within {WAIT:?}; output:\n{}",
                bin.display(),
                driver.output()
            ),
        };
        Ok(driver)
    }

    /// Everything the driver (and the browser through it) printed so far.
    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SIGKILL to the whole group: chromedriver, Chromium and every helper process.
        let _ = std::process::Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.pgid)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Reads `stream` line by line to its end into `output`, so the driver never blocks on a
/// full pipe; the first "started successfully on port N." line sends N to `port`.
async fn drain(
    stream: impl AsyncRead + Unpin,
    output: Arc<Mutex<String>>,
    mut port: Option<oneshot::Sender<u16>>,
) {
    const KEEP: usize = 64 * 1024;
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(rest) = line.split("started successfully on port ").nth(1)
            && let Ok(number) = rest.trim().trim_end_matches('.').parse()
            && let Some(port) = port.take()
        {
            let _ = port.send(number);
        }
        let mut output = output.lock().unwrap();
        if output.len() < KEEP {
            output.push_str(&line);
            output.push('\n');
        }
    }
}

// ---------------------------------------------------------------------------------------
// The harness's own test
// ---------------------------------------------------------------------------------------

mod fixture {
    //! A tiny site for the harness's own test: a page whose inline script its CSP blocks, a
    //! clean page with a GET form and a confirm button, the form's result and a page with a
    //! broken image.

    use std::collections::HashMap;

    use axum::Router;
    use axum::extract::Query;
    use axum::http::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE};
    use axum::response::{Html, IntoResponse};
    use axum::routing::get;
    use tokio::net::TcpListener;
    use tokio::task::JoinHandle;

    const HEAD: &str =
        r#"<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">"#;

    /// Serves the site on a port of its own; returns its base URL and the server task.
    pub async fn serve() -> (String, JoinHandle<()>) {
        let app = Router::new()
            .route("/csp", get(csp))
            .route("/form", get(form))
            .route("/confirm.js", get(confirm_js))
            .route("/result", get(result))
            .route("/broken", get(broken));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        (format!("http://{addr}"), server)
    }

    async fn csp() -> impl IntoResponse {
        (
            [(
                CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'self'",
            )],
            Html(format!(
                "{HEAD}<title>csp</title></head><body>\
                 <p id=\"status\">inline script blocked</p>\
                 <script>document.getElementById('status').textContent = 'inline script ran';</script>\
                 </body></html>"
            )),
        )
    }

    async fn form() -> Html<String> {
        Html(format!(
            "{HEAD}<title>form</title></head><body>\
             <form action=\"/result\" method=\"get\">\
             <input id=\"name\" name=\"name\" value=\"placeholder\">\
             <button id=\"go\" type=\"submit\">Go</button></form>\
             <button id=\"danger\" type=\"button\">Delete</button>\
             <script src=\"/confirm.js\"></script></body></html>"
        ))
    }

    async fn confirm_js() -> impl IntoResponse {
        (
            [(CONTENT_TYPE, "text/javascript")],
            "document.getElementById('danger').addEventListener('click', () => {\n\
             \x20 const p = document.createElement('p');\n\
             \x20 p.id = confirm('sure?') ? 'confirmed' : 'declined';\n\
             \x20 p.textContent = p.id;\n\
             \x20 document.body.append(p);\n\
             });\n",
        )
    }

    async fn result(Query(query): Query<HashMap<String, String>>) -> Html<String> {
        let name = query.get("name").map(String::as_str).unwrap_or_default();
        let name = name
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        Html(format!(
            "{HEAD}<title>result</title></head><body><p id=\"greeting\">Hello, {name}</p></body></html>"
        ))
    }

    async fn broken() -> Html<String> {
        Html(format!(
            "{HEAD}<title>broken</title></head><body>\
             <img id=\"missing\" src=\"/missing.png\" alt=\"missing\"></body></html>"
        ))
    }
}

#[tokio::test]
async fn browser_harness_sees_pages_and_csp_violations() {
    let Some(browser) = Browser::start("browser_harness_sees_pages_and_csp_violations").await
    else {
        return;
    };
    let (base, server) = fixture::serve().await;

    // A clean page: a GET form, typed into and submitted, leads to the next page.
    browser.goto(&format!("{base}/form")).await;
    browser.fill("#name", "Ada Lovelace").await;
    browser.click("#go").await;
    assert_eq!(browser.text_of("#greeting").await, "Hello, Ada Lovelace");
    assert_eq!(browser.current_path().await, "/result?name=Ada+Lovelace");

    // A confirm dialog opened by an external script: its text, and accepting it.
    browser.goto(&format!("{base}/form")).await;
    browser.click("#danger").await;
    assert_eq!(browser.accept_confirm().await, "sure?");
    assert_eq!(browser.text_of("#confirmed").await, "confirmed");
    assert_eq!(
        browser.console_errors().await,
        Vec::<String>::new(),
        "the clean pages log no errors"
    );
    let title = browser.client().title().await.unwrap();
    assert_eq!(title, "form");

    // A CSP violation shows up as a console error, and the inline script did not run.
    browser.goto(&format!("{base}/csp")).await;
    assert_eq!(browser.text_of("#status").await, "inline script blocked");
    let errors = browser.console_errors().await;
    assert!(
        errors.iter().any(|e| e.contains("Content Security Policy")),
        "expected a CSP violation in the console, got {errors:?}"
    );
    assert_eq!(
        browser.console_errors().await,
        Vec::<String>::new(),
        "console_errors reports each error once"
    );

    // A resource answered with 404 shows up too.
    browser.goto(&format!("{base}/broken")).await;
    let errors = browser.console_errors().await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("Failed to load resource") && e.contains("404")),
        "expected the missing image in the console, got {errors:?}"
    );

    let shots = TempDir::new().unwrap();
    let png = shots.path().join("nested/dir/broken.png");
    browser.screenshot(&png).await;
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG screenshot");

    browser.close().await;
    server.abort();
}
