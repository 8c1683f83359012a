//! The HTTP client of URL authentication: one `POST` of an
//! `application/x-www-form-urlencoded` body per connection (hyper HTTP/1.1), bounded by a
//! timeout covering connect, request and reply head. Only the reply head is read: the verdict is
//! in its headers (Icecast 2.4.4 `auth_url.c` reads the body and ignores it).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE, HOST, USER_AGENT};
use hyper_util::rt::TokioIo;
use thiserror::Error;
use throng_proto::auth::basic_authorization;
use throng_proto::url_auth::CallbackUrl;
use tokio::net::TcpStream;

/// Why a callback got no reply.
#[derive(Debug, Error)]
pub enum CallbackError {
    /// The TCP connection failed (refused, unreachable, name not resolved).
    #[error("cannot connect to {host}:{port}: {source}")]
    Connect {
        /// Callback host.
        host: String,
        /// Callback port.
        port: u16,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The HTTP exchange failed (connection reset, malformed reply).
    #[error("HTTP error: {0}")]
    Http(#[from] hyper::Error),
    /// The request could not be built (a header value with control characters).
    #[error("cannot build request: {0}")]
    Request(#[from] hyper::http::Error),
    /// No reply head within the timeout.
    #[error("no reply within {} ms", .0.as_millis())]
    Timeout(Duration),
}

/// The head of a callback reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackReply {
    /// HTTP status (not used for the verdict, as Icecast; logged).
    pub status: u16,
    /// Headers in order; values decoded lossily as UTF-8.
    pub headers: Vec<(String, String)>,
}

/// POSTs `body` to `url` with `User-Agent: user_agent` and, when `basic` is given, HTTP Basic
/// credentials; returns the reply head, or an error after at most `timeout`.
///
/// Errors: [`CallbackError`].
pub async fn post_form(
    url: &CallbackUrl,
    basic: Option<&(String, String)>,
    user_agent: &str,
    body: String,
    timeout: Duration,
) -> Result<CallbackReply, CallbackError> {
    let content_type = "application/x-www-form-urlencoded";
    post(url, basic, user_agent, content_type, &[], body, timeout).await
}

/// As [`post_form`], with the body's `Content-Type` and `extra` headers given (an edge's
/// signed JSON report to its origin, `cluster/report.rs`).
///
/// Errors: [`CallbackError`].
pub async fn post(
    url: &CallbackUrl,
    basic: Option<&(String, String)>,
    user_agent: &str,
    content_type: &str,
    extra: &[(&str, &str)],
    body: String,
    timeout: Duration,
) -> Result<CallbackReply, CallbackError> {
    let work = exchange(url, basic, user_agent, content_type, extra, body);
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(CallbackError::Timeout(timeout)),
    }
}

async fn exchange(
    url: &CallbackUrl,
    basic: Option<&(String, String)>,
    user_agent: &str,
    content_type: &str,
    extra: &[(&str, &str)],
    body: String,
) -> Result<CallbackReply, CallbackError> {
    let tcp = TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|source| CallbackError::Connect {
            host: url.host.clone(),
            port: url.port,
            source,
        })?;
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    let mut req = hyper::Request::post(url.path.as_str())
        .header(HOST, url.authority.as_str())
        .header(USER_AGENT, user_agent)
        .header(CONTENT_TYPE, content_type)
        .header(CONNECTION, "close");
    if let Some((user, pass)) = basic {
        req = req.header(AUTHORIZATION, basic_authorization(user, pass));
    }
    for (name, value) in extra {
        req = req.header(*name, *value);
    }
    let req = req.body(Full::new(Bytes::from(body)))?;
    // The connection is driven here, not in a spawned task, so a timeout drops all of it.
    let send = sender.send_request(req);
    tokio::pin!(conn);
    tokio::pin!(send);
    let resp = tokio::select! {
        r = &mut send => r?,
        r = &mut conn => {
            r?;
            // The connection ended cleanly without a reply: let the request report why.
            send.await?
        }
    };
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    Ok(CallbackReply {
        status: resp.status().as_u16(),
        headers,
    })
}
