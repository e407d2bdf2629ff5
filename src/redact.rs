//! URLs as logs and messages may show them: without the credentials they can carry.

/// `raw` with its password masked, in the userinfo and in a `password=` query parameter
/// (libpq accepts both): for a database URL, whose other parts say which database it is.
/// A string that is not a URL is not repeated at all. Several hosts
/// (`postgres://u@db1:5432,db2:5432/hookq`, for a failover) are kept as they are.
pub fn url(raw: &str) -> String {
    if let Some((one_host, hosts)) = several_hosts(raw) {
        return url(&one_host).replacen(SEVERAL_HOSTS, hosts, 1);
    }
    let Ok(mut parsed) = url::Url::parse(raw) else {
        return "<a URL that does not parse>".to_owned();
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("***"));
    }
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(name, value)| {
                let value = if name.eq_ignore_ascii_case("password") {
                    "***".to_owned()
                } else {
                    value.into_owned()
                };
                (name.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

/// Stands for the hosts of a URL that names several, which `url::Url` does not parse.
const SEVERAL_HOSTS: &str = "several-hosts.invalid";

/// For a URL naming several hosts: the URL with [`SEVERAL_HOSTS`] in their place, and the
/// hosts. None for one host (or none).
fn several_hosts(raw: &str) -> Option<(String, &str)> {
    let start = raw.find("://")? + 3;
    let end = raw[start..]
        .find(['/', '?', '#'])
        .map_or(raw.len(), |i| start + i);
    let authority = &raw[start..end];
    let hosts_start = authority.rfind('@').map_or(start, |at| start + at + 1);
    let hosts = &raw[hosts_start..end];
    hosts.contains(',').then(|| {
        (
            format!("{}{SEVERAL_HOSTS}{}", &raw[..hosts_start], &raw[end..]),
            hosts,
        )
    })
}

/// `url` as scheme, host, port and path only: for a webhook URL, whose userinfo and query
/// are where tokens usually ride.
pub fn endpoint(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{}://{host}:{port}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

/// Remove what a webhook URL's bearer may not show: its userinfo, query and fragment.
pub fn strip_credentials(url: &mut url::Url) {
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
}

/// A redirect's `Location` as an error may show it: an absolute URL as [`endpoint`] shows
/// it, a relative one without its query.
pub fn location(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(url) => endpoint(&url),
        Err(_) => raw.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_of_several_hosts_keeps_them_and_loses_its_password() {
        assert_eq!(
            url(
                "postgres://hookq:s3cret@db1:5432,db2:5433/hookq?target_session_attrs=read-write&password=x"
            ),
            "postgres://hookq:***@db1:5432,db2:5433/hookq?target_session_attrs=read-write&password=***"
        );
        assert_eq!(url("postgres://db1,db2/hookq"), "postgres://db1,db2/hookq");
    }

    #[test]
    fn passwords_are_masked_wherever_a_database_url_carries_them() {
        assert_eq!(
            url("postgres://hookq:s3cret@db.example:5432/hookq?sslmode=require"),
            "postgres://hookq:***@db.example:5432/hookq?sslmode=require"
        );
        assert_eq!(
            url("postgres://hookq@db/hookq?sslmode=require&password=s3cret"),
            "postgres://hookq@db/hookq?sslmode=require&password=***"
        );
        assert_eq!(
            url("postgres://db/hookq?PassWord=s3cret"),
            "postgres://db/hookq?PassWord=***"
        );
        assert_eq!(url("postgres://db/hookq"), "postgres://db/hookq");
        assert!(!url("postgres://u:s3cret@[bad").contains("s3cret"));
    }

    #[test]
    fn an_endpoint_shows_neither_userinfo_nor_query() {
        let parsed =
            url::Url::parse("https://user:pw@hooks.example:8443/ops/in?token=t0k3n#x").unwrap();
        assert_eq!(endpoint(&parsed), "https://hooks.example:8443/ops/in");
        let parsed = url::Url::parse("http://hooks.example/in?token=t0k3n").unwrap();
        assert_eq!(endpoint(&parsed), "http://hooks.example/in");
    }

    #[test]
    fn webhook_urls_lose_their_tokens() {
        let mut url = url::Url::parse("https://u:p@hooks.example/x/y?token=s3cret#f").unwrap();
        strip_credentials(&mut url);
        assert_eq!(url.as_str(), "https://hooks.example/x/y");
        assert_eq!(
            location("https://a:b@else.example:8443/p?token=s3cret"),
            "https://else.example:8443/p"
        );
        assert_eq!(location("/next?token=s3cret"), "/next");
    }
}
