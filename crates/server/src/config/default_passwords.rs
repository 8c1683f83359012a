//! Icecast's well-known default passwords: `hackme`, which Icecast's sample `icecast.xml`,
//! Debian's `icecast2` package and many tutorials ship for the source, relay and admin logins.
//! A configuration still holding one is accepted (Icecast accepts it too) but every load warns
//! about it, and `throng check-config` prints it, because anyone can take a stream over or
//! reach the admin pages with it. Pure: [`warnings`] looks at a configuration only.

use super::Config;

/// Passwords Icecast ships or documents as examples, compared exactly.
pub const WELL_KNOWN: [&str; 1] = ["hackme"];

/// One line per password setting of `config` that holds a [`WELL_KNOWN`] value, naming the
/// setting (as the TOML key) but never the value's use beyond the word itself.
pub fn warnings(config: &Config) -> Vec<String> {
    let a = &config.authentication;
    let mut found: Vec<(String, &'static str)> = Vec::new();
    let mut check = |key: String, value: Option<&str>| {
        if let Some(v) = WELL_KNOWN.iter().find(|w| value == Some(**w)) {
            found.push((key, v));
        }
    };
    check(
        "authentication.source-password".into(),
        a.source_password.as_deref(),
    );
    check(
        "authentication.admin-password".into(),
        a.admin_password.as_deref(),
    );
    check(
        "authentication.relay-password".into(),
        a.relay_password.as_deref(),
    );
    check(
        "authentication.metrics-password".into(),
        a.metrics_password.as_deref(),
    );
    check(
        "authentication.cache-log-password".into(),
        a.cache_log_password.as_deref(),
    );
    for m in &config.mount {
        check(format!("mount[{}].password", m.name), m.password.as_deref());
    }
    for r in &config.relay {
        check(
            format!("relay[{}].password", r.local()),
            r.password.as_deref(),
        );
    }
    if let Some(m) = &config.master {
        check("master.password".into(), Some(m.password.as_str()));
    }
    found
        .into_iter()
        .map(|(key, v)| {
            format!(
                "{key} is {v:?}, Icecast's well-known default password: anyone can use it; \
                 set another"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_holding_hackme_is_named() {
        let c = Config::from_toml(
            "[authentication]\nsource-password = \"hackme\"\nadmin-password = \"s3cret-long\"\n\
             relay-password = \"hackme\"\n[[mount]]\nname = \"/live\"\npassword = \"hackme\"\n",
        )
        .unwrap();
        let w = warnings(&c);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].starts_with("authentication.source-password is \"hackme\""));
        assert!(w[1].starts_with("authentication.relay-password"));
        assert!(w[2].starts_with("mount[/live].password"));
        assert!(warnings(&Config::default()).is_empty());
    }
}
