//! Which build a test binary belongs to: the checkout, the package version, the profile and
//! the features it was compiled with. `suite_on_postgres` runs the `api` test binary of its
//! own build, and this is how it tells that binary from others in the same `deps` directory
//! (another configuration, another checkout sharing the target directory).

/// The marker before the identity in the `api` binary's output.
pub const MARKER: &str = "hookq-test-build:";

/// This binary's build, as one line.
pub fn identity() -> String {
    format!(
        "{} {} debug_assertions={} testing={}",
        env!("CARGO_MANIFEST_DIR"),
        env!("CARGO_PKG_VERSION"),
        cfg!(debug_assertions),
        cfg!(feature = "testing"),
    )
}
