//! A Redis URL as it may be printed: its password hidden.

/// `url` with its password hidden, for logs and `Debug` output: the password of the user
/// information (`redis://user:password@host`, everything between the first `:` after the user
/// name and the last `@`) and the value of a `pass` or `password` query parameter (the form
/// `redis+unix://` URLs take) read `***`. A user name alone is printed with `:***` after it, so
/// that a log does not tell whether a password was set. Text that is not a URL is returned as it
/// is.
///
/// ```
/// use tollgate::distributed::redacted_url;
///
/// assert_eq!(redacted_url("redis://:hunter2@cache:6379/0"), "redis://:***@cache:6379/0");
/// assert_eq!(redacted_url("redis+unix:///run/redis.sock?pass=hunter2"), "redis+unix:///run/redis.sock?pass=***");
/// ```
pub fn redacted_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The last `@` ends the user information: a password may hold an `@`, `/` or `?` of its own
    // (an `@` in a query value only hides more).
    let (user_info, after) = match rest.rsplit_once('@') {
        Some((user_info, after)) => {
            let user = user_info.split_once(':').map_or(user_info, |(user, _)| user);
            (format!("{user}:***@"), after)
        }
        None => (String::new(), rest),
    };
    let after = match after.split_once('?') {
        Some((path, query)) => {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if name == "pass" || name == "password" => format!("{name}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", pairs.join("&"))
        }
        None => after.to_owned(),
    };
    format!("{scheme}://{user_info}{after}")
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
            ("rediss://user:p@ss@host:6380", "rediss://user:***@host:6380"),
            ("redis://user:pa/ss?word@host/1", "redis://user:***@host/1"),
            ("redis://user@host/", "redis://user:***@host/"),
            (
                "redis+unix:///tmp/r.sock?db=1&pass=secret",
                "redis+unix:///tmp/r.sock?db=1&pass=***",
            ),
            (
                "unix:///tmp/r.sock?password=secret&db=2",
                "unix:///tmp/r.sock?password=***&db=2",
            ),
            (
                "redis://host:6379/0?protocol=resp3",
                "redis://host:6379/0?protocol=resp3",
            ),
            ("not a url", "not a url"),
        ] {
            assert_eq!(redacted_url(url), shown, "{url}");
        }
    }
}
