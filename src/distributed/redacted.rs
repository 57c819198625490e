//! A Redis URL as it may be printed: its password hidden.

/// `url` with its secrets hidden, for logs and `Debug` output, read as the Redis client reads it
/// (the `url` crate's parser, through `redis::parse_redis_url`): the password of the user
/// information (`redis://user:password@host`) reads `***`, and so does the value of every query
/// parameter but `db` and `protocol` (a `redis+unix` URL carries its `user` and `pass` there),
/// and the name of every parameter but those and `user` and `pass`. Text the client would not
/// take as a Redis URL, and a URL with an `@` after its host (a password holding an unencoded
/// `/`, `?` or `#` is cut there, and its first part read as the port), read as a placeholder: a
/// parser that disagrees with the client's about where the password ends could show it.
///
/// ```
/// use tollgate::distributed::redacted_url;
///
/// assert_eq!(redacted_url("redis://:hunter2@cache:6379/0"), "redis://:***@cache:6379/0");
/// assert_eq!(
///     redacted_url("redis+unix:///run/redis.sock?db=1&pass=hunter2"),
///     "redis+unix:///run/redis.sock?db=1&pass=***"
/// );
/// assert_eq!(redacted_url("http://cache/"), "<not a Redis URL>");
/// ```
pub fn redacted_url(url: &str) -> String {
    const NOT_A_URL: &str = "<not a Redis URL>";
    const CUT: &str = "<a Redis URL with an `@` after its host, hidden>";
    let Some(mut parsed) = redis::parse_redis_url(url) else {
        return NOT_A_URL.to_owned();
    };
    let after_host = [Some(parsed.path()), parsed.query(), parsed.fragment()];
    if parsed.has_host() && after_host.iter().flatten().any(|part| part.contains('@')) {
        return CUT.to_owned();
    }
    if parsed.password().is_some() && parsed.set_password(Some("***")).is_err() {
        return NOT_A_URL.to_owned();
    }
    let pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(name, value)| match name.as_ref() {
            "db" | "protocol" => (name.into_owned(), value.into_owned()),
            "user" | "pass" => (name.into_owned(), "***".to_owned()),
            _ => ("***".to_owned(), "***".to_owned()),
        })
        .collect();
    if parsed.query().is_some() {
        parsed.set_query(None);
        let mut query = parsed.query_pairs_mut();
        for (name, value) in &pairs {
            query.append_pair(name, value);
        }
    }
    // `rediss://...#insecure` turns certificate checks off: worth showing. Nothing else is.
    if parsed.fragment() != Some("insecure") {
        parsed.set_fragment(None);
    }
    parsed.into()
}

#[cfg(test)]
mod tests {
    use super::redacted_url;

    #[test]
    fn a_printed_redis_url_hides_its_password() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
            (
                "redis://:secret@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            ("rediss://user:p%40ss@host:6380", "rediss://user:***@host:6380"),
            ("redis://user@host/", "redis://user@host/"),
            (
                "redis+unix:///tmp/r.sock?db=1&pass=secret",
                "redis+unix:///tmp/r.sock?db=1&pass=***",
            ),
            (
                "redis://host:6379/0?protocol=resp3",
                "redis://host:6379/0?protocol=resp3",
            ),
            ("not a url", "<not a Redis URL>"),
            ("rediss://:secret@h/#insecure", "rediss://:***@h/#insecure"),
            (
                "redis://admin:6380?Zk9x@cache:6379/0",
                "<a Redis URL with an `@` after its host, hidden>",
            ),
        ] {
            assert_eq!(redacted_url(url), shown, "{url}");
        }
    }

    /// URLs the Redis client accepts in forms that a split of the text at `//`, `:`, `@` and `?`
    /// reads otherwise than the client (no `//`, an `@` in a query value, a percent-encoded
    /// query name, a tab the parser drops, a fragment): none shows its password, since
    /// `redacted_url` reads each as the client does.
    #[test]
    fn no_url_the_client_accepts_shows_its_password() {
        for url in [
            "redis+unix:///run/redis.sock?pass=secret&user=svc@corp",
            "redis+unix:///run/redis.sock?pass=sec@ret",
            "redis+unix:///run/redis.sock?user=svc@corp&pass=secret",
            "unix:/run/redis.sock?pass=secret",
            "redis+unix:/run/redis.sock?pass=secret",
            "redis+unix:///run/redis.sock?p%61ss=secret",
            "redis:/\t/:secret@cache:6379/0",
            "redis://:secret@cache:6379/0#secret",
            "redis+unix:///run/redis.sock?pass=sec&secret",
            "redis+unix:///run/redis.sock?user=svc&pass=sec&ret&secret",
            "redis://admin:secret?x@cache:6379/0",
            "redis://admin:secret#x@cache:6379/0",
            "redis://admin:sec/secret@cache:6379/0",
            "redis://u:secret@[::1]:6379/0",
            "redis://:s%C3%A9cret@h\u{e9}st/0",
        ] {
            let shown = redacted_url(url);
            assert!(
                !shown.contains("secret") && !shown.contains("sec@ret"),
                "{url:?} -> {shown}"
            );
        }
    }
}
