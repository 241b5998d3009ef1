//! The daemon's HTTP endpoint: `GET /metrics` (the Prometheus text of GetMetrics) and
//! `GET /status` (the status as JSON), for scrapers and dashboards that speak no gRPC.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::daemon::Daemon;
use crate::server::ServeError;

type Answer = Response<Full<Bytes>>;

fn answer(code: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Answer {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = code;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The answer to one request.
fn route(daemon: &Daemon, token: Option<&str>, request: &Request<Incoming>) -> Answer {
    let text = "text/plain; charset=utf-8";
    if let Some(expected) = token {
        let given = request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if !crate::server::bearer_matches(given, expected) {
            let mut r = answer(
                StatusCode::UNAUTHORIZED,
                text,
                "a bearer token is required (authorization: Bearer <token>)\n",
            );
            r.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    if request.method() != Method::GET {
        return answer(
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            "only GET /metrics and GET /status\n",
        );
    }
    match request.uri().path() {
        "/metrics" => answer(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            daemon.metrics(),
        ),
        "/status" => match serde_json::to_vec(&daemon.status()) {
            Ok(json) => answer(StatusCode::OK, "application/json", json),
            Err(e) => answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                text,
                format!("the status could not be written as JSON: {e}\n"),
            ),
        },
        _ => answer(
            StatusCode::NOT_FOUND,
            text,
            "not found: GET /metrics or GET /status\n",
        ),
    }
}

/// Serves `daemon`'s figures on `listener` until `stop` resolves.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    daemon: Arc<Daemon>,
    token: Option<Arc<str>>,
    stop: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let addr = listener.local_addr().ok();
    tracing::info!(
        ?addr,
        authenticated = token.is_some(),
        "serving /metrics and /status over HTTP"
    );
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stop => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // A failed accept (say, out of file descriptors) refuses one caller only.
                    tracing::warn!(error = %e, "an HTTP connection could not be accepted");
                    continue;
                }
            },
        };
        let daemon = Arc::clone(&daemon);
        let token = token.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let r = route(&daemon, token.as_deref(), &request);
                async move { Ok::<_, Infallible>(r) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "an HTTP connection ended with an error");
            }
        });
    }
}
