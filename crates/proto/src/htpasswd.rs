//! htpasswd files: parsing and password checks, as Icecast 2.4.4 `auth_htpasswd.c` reads them,
//! plus the Apache formats.
//!
//! A line is `user:hash`; empty lines and lines starting with `#` are skipped, and the user name
//! ends at the *last* `:` (Icecast's `strrchr`). Hash formats: Icecast's own 32 hex digits of
//! MD5(password) (what Icecast's `manageauth` writes), Apache `$apr1$` (MD5-crypt with the APR
//! magic), `$1$` (MD5-crypt), `{SHA}` (base64 SHA-1) and bcrypt (`$2a$`, `$2b$`, `$2x$`, `$2y$`).
//! Other lines (DES `crypt`, plain text) never match and are reported as unsupported.
//!
//! Also the two file edits of Icecast's `manageauth` admin command: the line `adduser` appends
//! ([`user_line`]) and the rewrite `deleteuser` makes ([`without_user`]).

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use md5::{Digest, Md5};
use sha1::Sha1;

use thiserror::Error;

use crate::auth::secrets_equal;

/// A stored password hash from one htpasswd line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordHash {
    /// Icecast's format: lowercase hex of MD5(password), 32 digits (`auth_htpasswd.c:get_hash`).
    IcecastMd5(String),
    /// MD5-crypt, `$apr1$salt$hash` (Apache) or `$1$salt$hash` (glibc).
    Md5Crypt {
        /// `$apr1$` or `$1$`.
        magic: &'static str,
        /// Salt, at most 8 characters.
        salt: String,
        /// 22 characters of the crypt base-64 alphabet.
        hash: String,
    },
    /// `{SHA}` followed by base64 of SHA-1(password) (Apache `htpasswd -s`).
    Sha1(String),
    /// A bcrypt string (`$2y$10$...`, Apache `htpasswd -B`).
    Bcrypt(String),
    /// A format this server cannot check (DES crypt, plain text, ...); never matches.
    Unsupported,
}

impl PasswordHash {
    /// Classifies the hash part of a line (after the user's `:`).
    pub fn parse(hash: &str) -> PasswordHash {
        let hash = hash.trim();
        for magic in [APR1_MAGIC, MD5_CRYPT_MAGIC] {
            if let Some(rest) = hash.strip_prefix(magic) {
                return match rest.split_once('$') {
                    Some((salt, h)) if salt.len() <= 8 && h.len() == 22 => PasswordHash::Md5Crypt {
                        magic,
                        salt: salt.to_owned(),
                        hash: h.to_owned(),
                    },
                    _ => PasswordHash::Unsupported,
                };
            }
        }
        if let Some(b64) = hash.strip_prefix("{SHA}") {
            return PasswordHash::Sha1(b64.to_owned());
        }
        if ["$2a$", "$2b$", "$2x$", "$2y$"]
            .iter()
            .any(|p| hash.starts_with(p))
        {
            return PasswordHash::Bcrypt(hash.to_owned());
        }
        if hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return PasswordHash::IcecastMd5(hash.to_ascii_lowercase());
        }
        PasswordHash::Unsupported
    }

    /// Whether `password` matches. Bcrypt costs tens of milliseconds of CPU at usual costs
    /// (10–12): call it off the async runtime.
    pub fn verify(&self, password: &str) -> bool {
        match self {
            PasswordHash::IcecastMd5(hex) => secrets_equal(&md5_hex(password), hex),
            PasswordHash::Md5Crypt { magic, salt, hash } => secrets_equal(
                &md5_crypt(password.as_bytes(), salt.as_bytes(), magic),
                hash,
            ),
            PasswordHash::Sha1(b64) => {
                secrets_equal(&STANDARD.encode(Sha1::digest(password.as_bytes())), b64)
            }
            PasswordHash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
            PasswordHash::Unsupported => false,
        }
    }
}

/// Apache's MD5-crypt magic.
pub const APR1_MAGIC: &str = "$apr1$";
/// The original (FreeBSD/glibc) MD5-crypt magic.
pub const MD5_CRYPT_MAGIC: &str = "$1$";

/// Lowercase hex of MD5(`password`): the hash Icecast 2.4.4 stores for a user.
pub fn md5_hex(password: &str) -> String {
    Md5::digest(password.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A user name that cannot be written to an htpasswd file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UserNameError {
    /// The name contains `:` (the separator; Icecast 2.4.4 writes it anyway and then cannot
    /// delete the user), a line break or NUL.
    #[error("user name {0:?} contains ':', a line break or NUL")]
    Forbidden(String),
}

/// The line Icecast 2.4.4 `auth_htpasswd.c:htpasswd_adduser` appends for a new user:
/// `user:md5hex(password)\n`.
///
/// Errors: [`UserNameError::Forbidden`] when `user` contains `:`, `\n`, `\r` or NUL, which
/// would make a line that names another user or none (Icecast does not check).
pub fn user_line(user: &str, password: &str) -> Result<String, UserNameError> {
    if user.contains([':', '\n', '\r', '\0']) {
        return Err(UserNameError::Forbidden(user.to_owned()));
    }
    Ok(format!("{user}:{}\n", md5_hex(password)))
}

/// The file `text` without the lines of `user`, as Icecast 2.4.4
/// `auth_htpasswd.c:htpasswd_deleteuser` rewrites it: each line (with a trailing `\r`
/// removed) is kept, ended by `\n`, unless it is empty, starts with `#`, has no `:`, or its
/// user (up to the *first* `:`) is `user`. So comments and blank lines are dropped too, as
/// Icecast does. Works on bytes: other lines are kept byte for byte. Also returns whether a
/// line of `user` was found.
pub fn without_user(text: &[u8], user: &str) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(text.len());
    let mut found = false;
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let Some(sep) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if &line[..sep] == user.as_bytes() {
            found = true;
            continue;
        }
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    (out, found)
}

/// The 64 characters of crypt's base-64 encoding.
const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The 22-character MD5-crypt hash of `password` with `salt` (first 8 bytes used) and `magic`
/// (`$1$` or `$apr1$`), as Poul-Henning Kamp's `md5crypt` and APR's `apr_md5_encode` define it.
pub fn md5_crypt(password: &[u8], salt: &[u8], magic: &str) -> String {
    let salt = &salt[..salt.len().min(8)];
    let mut alt = Md5::new();
    alt.update(password);
    alt.update(salt);
    alt.update(password);
    let alt = alt.finalize();

    let mut ctx = Md5::new();
    ctx.update(password);
    ctx.update(magic.as_bytes());
    ctx.update(salt);
    let mut left = password.len();
    while left > 0 {
        let n = left.min(16);
        ctx.update(&alt[..n]);
        left -= n;
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(&password[..1]);
        }
        i >>= 1;
    }
    let mut fin = ctx.finalize();

    for round in 0..1000 {
        let mut c = Md5::new();
        if round & 1 == 1 {
            c.update(password);
        } else {
            c.update(fin);
        }
        if round % 3 != 0 {
            c.update(salt);
        }
        if round % 7 != 0 {
            c.update(password);
        }
        if round & 1 == 1 {
            c.update(fin);
        } else {
            c.update(password);
        }
        fin = c.finalize();
    }

    let mut out = String::with_capacity(22);
    let mut put = |v: u32, n: usize| {
        let mut v = v;
        for _ in 0..n {
            out.push(ITOA64[(v & 0x3f) as usize] as char);
            v >>= 6;
        }
    };
    let f = |i: usize| fin[i] as u32;
    put((f(0) << 16) | (f(6) << 8) | f(12), 4);
    put((f(1) << 16) | (f(7) << 8) | f(13), 4);
    put((f(2) << 16) | (f(8) << 8) | f(14), 4);
    put((f(3) << 16) | (f(9) << 8) | f(15), 4);
    put((f(4) << 16) | (f(10) << 8) | f(5), 4);
    put(f(11), 2);
    out
}

/// The users of one htpasswd file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Htpasswd {
    users: HashMap<String, PasswordHash>,
}

/// A line of an htpasswd file that was skipped or cannot be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineProblem {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong (`no separator`, `unsupported hash format`).
    pub what: &'static str,
}

/// How a check of user and password came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The password matches.
    Ok,
    /// No such user.
    NoSuchUser,
    /// The user exists and the password does not match (or the hash format is unsupported).
    WrongPassword,
}

impl Htpasswd {
    /// Parses the text of a file; returns the users and the lines it skipped or cannot check.
    /// A user listed twice keeps its first line.
    pub fn parse(text: &str) -> (Htpasswd, Vec<LineProblem>) {
        let mut users = HashMap::new();
        let mut problems = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((user, hash)) = line.rsplit_once(':') else {
                problems.push(LineProblem {
                    line: i + 1,
                    what: "no separator",
                });
                continue;
            };
            let hash = PasswordHash::parse(hash);
            if hash == PasswordHash::Unsupported {
                problems.push(LineProblem {
                    line: i + 1,
                    what: "unsupported hash format",
                });
            }
            users.entry(user.to_owned()).or_insert(hash);
        }
        (Htpasswd { users }, problems)
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the file has no users.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// The user names, sorted byte-wise (the order of Icecast 2.4.4's user tree, `strcmp`).
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.users.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// The stored hash of `user`, if listed.
    pub fn hash_of(&self, user: &str) -> Option<&PasswordHash> {
        self.users.get(user)
    }

    /// Checks `user` and `password` (user names are case-sensitive, as Icecast's `strcmp`).
    pub fn check(&self, user: &str, password: &str) -> Check {
        match self.users.get(user) {
            None => Check::NoSuchUser,
            Some(h) if h.verify(password) => Check::Ok,
            Some(_) => Check::WrongPassword,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icecast_md5_lines() {
        // md5("hackme") = 23b4222d2613a2765d4d432d2d65e88e
        assert_eq!(md5_hex("hackme"), "23b4222d2613a2765d4d432d2d65e88e");
        let (f, problems) =
            Htpasswd::parse("# users\n\nfred:23b4222d2613a2765d4d432d2d65e88e\r\nbad line\n");
        assert_eq!(
            problems,
            vec![LineProblem {
                line: 4,
                what: "no separator"
            }]
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f.check("fred", "hackme"), Check::Ok);
        assert_eq!(f.check("fred", "hackm"), Check::WrongPassword);
        assert_eq!(f.check("Fred", "hackme"), Check::NoSuchUser);
    }

    #[test]
    fn user_ends_at_last_colon_as_icecast() {
        let (f, _) = Htpasswd::parse("a:b:23b4222d2613a2765d4d432d2d65e88e\n");
        assert_eq!(f.check("a:b", "hackme"), Check::Ok);
    }

    #[test]
    fn added_lines_as_icecast_writes_them() {
        assert_eq!(
            user_line("fred", "hackme").as_deref(),
            Ok("fred:23b4222d2613a2765d4d432d2d65e88e\n")
        );
        // Icecast writes an empty user name as given.
        assert_eq!(
            user_line("", "hackme").as_deref(),
            Ok(":23b4222d2613a2765d4d432d2d65e88e\n")
        );
        for bad in ["a:b", "a\nb", "a\r", "a\0b"] {
            assert_eq!(
                user_line(bad, "x"),
                Err(UserNameError::Forbidden(bad.to_owned()))
            );
        }
    }

    #[test]
    fn deleting_rewrites_as_icecast() {
        let text =
            b"# users\r\n\nfred:aa\r\nann:$apr1$s$h\nno separator\nfred:bb\nfredx:cc\n\xe9t\xe9:dd";
        let (out, found) = without_user(text, "fred");
        assert!(found);
        // Comments, blank and separator-less lines go; CRLF becomes LF; the last line gets its
        // newline; other bytes are kept (Latin-1 here).
        assert_eq!(out, b"ann:$apr1$s$h\nfredx:cc\n\xe9t\xe9:dd\n".to_vec());
        let (out, found) = without_user(b"ann:x\n", "fred");
        assert!(!found);
        assert_eq!(out, b"ann:x\n".to_vec());
        // The user ends at the first `:` here (Icecast's `strchr`).
        let (out, found) = without_user(b"a:b:hash\n", "a");
        assert!(found && out.is_empty());
    }

    #[test]
    fn names_are_sorted_bytewise() {
        let (f, _) = Htpasswd::parse("zed:x\nAnn:x\nbob:x\n");
        assert_eq!(f.names(), vec!["Ann", "bob", "zed"]);
    }

    #[test]
    fn apr1_and_md5_crypt_vectors() {
        // `openssl passwd -apr1 -salt lZL6V/ci password`.
        assert_eq!(
            md5_crypt(b"password", b"lZL6V/ci", APR1_MAGIC),
            "eIMz/iKDkbtys/uU7LEK00"
        );
        // `openssl passwd -1 -salt saltsalt password`.
        assert_eq!(
            md5_crypt(b"password", b"saltsalt", MD5_CRYPT_MAGIC),
            "qjXMvbEw8oaL.CzflDtaK/"
        );
        let (f, p) = Htpasswd::parse(
            "ap:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00\nmd:$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/\n",
        );
        assert!(p.is_empty());
        assert_eq!(f.check("ap", "password"), Check::Ok);
        assert_eq!(f.check("ap", "Password"), Check::WrongPassword);
        assert_eq!(f.check("md", "password"), Check::Ok);
    }

    #[test]
    fn sha1_and_bcrypt() {
        // `printf password | openssl sha1 -binary | base64`, and a cost-5 bcrypt of `password`.
        let text = "s:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n\
                    b:$2y$05$nC6nErr9XZJuMJ57WyCob.EuZEjylDt2KaHfbfOtyb.EgL1I2jCVa\n";
        let (f, p) = Htpasswd::parse(text);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(f.check("s", "password"), Check::Ok);
        assert_eq!(f.check("s", "passwort"), Check::WrongPassword);
        assert!(matches!(f.hash_of("b"), Some(PasswordHash::Bcrypt(_))));
        assert_eq!(f.check("b", "password"), Check::Ok);
        assert_eq!(f.check("b", "nope"), Check::WrongPassword);
    }

    #[test]
    fn unsupported_lines_never_match() {
        let (f, p) = Htpasswd::parse("des:bGVh02xkuGli2\nplain:secret\nbroken:$apr1$x\n");
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|l| l.what == "unsupported hash format"));
        assert_eq!(f.check("des", "password"), Check::WrongPassword);
        assert_eq!(f.check("plain", "secret"), Check::WrongPassword);
    }
}
