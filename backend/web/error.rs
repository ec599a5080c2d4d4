//! One error type for every handler: 4xx carry a clear message, 5xx log the cause and return
//! a generic text. Two renderings of it: [`ApiError`] answers JSON `{error}` for /api,
//! [`PageError`] the one HTML error page (`templates/error.html`) for every page.

use crate::answers::load::ExplainError;
use askama::Template;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    Unprocessable(String),
    /// Not yet: the answer is being prepared (503, with Retry-After).
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<crate::db::rebuild::SummaryError> for AppError {
    fn from(e: crate::db::rebuild::SummaryError) -> Self {
        match e {
            crate::db::rebuild::SummaryError::Db(e) => e.into(),
            e @ crate::db::rebuild::SummaryError::Building { .. } => AppError::Unavailable(e.to_string()),
        }
    }
}

/// Seconds a client is asked to wait before retrying a 503.
const RETRY_AFTER_S: &str = "10";

impl From<sqlx::Error> for AppError {
    fn from(e: sqlx::Error) -> Self {
        AppError::Internal(e.into())
    }
}

impl From<ExplainError> for AppError {
    fn from(e: ExplainError) -> Self {
        match e {
            ExplainError::Bad(m) => AppError::BadRequest(m),
            ExplainError::NotFound(m) => AppError::NotFound(m),
            ExplainError::Unprocessable(m) => AppError::Unprocessable(m),
            e @ ExplainError::OverBudget(_) => AppError::Unprocessable(e.to_string()),
            ExplainError::Busy(m) => AppError::Unavailable(m),
            e @ ExplainError::Ambiguous(_) => AppError::BadRequest(e.to_string()),
            ExplainError::Db(e) => e.into(),
        }
    }
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message a client may see (never the internals of a 5xx).
    pub fn public_message(&self) -> String {
        match self {
            AppError::Internal(e) => {
                tracing::error!(error = ?e, "internal error");
                "internal error".into()
            }
            other => other.to_string(),
        }
    }
}

/// JSON error for /api routes.
pub struct ApiError(pub AppError);

impl<E: Into<AppError>> From<E> for ApiError {
    fn from(e: E) -> Self {
        ApiError(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let body = axum::Json(serde_json::json!({ "error": self.0.public_message() }));
        if status == StatusCode::SERVICE_UNAVAILABLE {
            return (status, [(header::RETRY_AFTER, RETRY_AFTER_S)], body).into_response();
        }
        (status, body).into_response()
    }
}

/// An error answered as the HTML error page.
pub struct PageError(pub AppError);

impl<E: Into<AppError>> From<E> for PageError {
    fn from(e: E) -> Self {
        PageError(e.into())
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    title: String,
    status: u16,
    message: String,
    /// Reload after this many seconds (a 503: the answer is being prepared).
    refresh: Option<&'static str>,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let page = ErrorPage {
            title: status.canonical_reason().unwrap_or("error").to_string(),
            status: status.as_u16(),
            message: self.0.public_message(),
            refresh: (status == StatusCode::SERVICE_UNAVAILABLE).then_some(RETRY_AFTER_S),
        };
        let body = page.render().unwrap_or_else(|e| {
            tracing::error!(error = ?e, "rendering the error page");
            "error".into()
        });
        let mut res = (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            res.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static(RETRY_AFTER_S));
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 503 (the first summary build of a large database) asks to retry, and its page reloads.
    #[tokio::test]
    async fn unavailable_asks_to_retry_and_the_page_reloads() {
        let msg = "the dashboard's summary of 1250392 entries is being built for the first time";
        let page = PageError(AppError::Unavailable(msg.into())).into_response();
        assert_eq!(page.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(page.headers()[header::RETRY_AFTER], RETRY_AFTER_S);
        let body = axum::body::to_bytes(page.into_body(), 1 << 20).await.unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(body.contains(&format!(r#"<meta http-equiv="refresh" content="{RETRY_AFTER_S}">"#)), "{body}");
        assert!(body.contains("being built for the first time"), "{body}");
        let api = ApiError(AppError::Unavailable(msg.into())).into_response();
        assert_eq!(
            (api.status(), &api.headers()[header::RETRY_AFTER]),
            (StatusCode::SERVICE_UNAVAILABLE, &RETRY_AFTER_S.parse().unwrap())
        );
        // Other errors neither retry nor reload.
        let nf = PageError(AppError::NotFound("no such page".into())).into_response();
        assert!(nf.headers().get(header::RETRY_AFTER).is_none());
        let body = axum::body::to_bytes(nf.into_body(), 1 << 20).await.unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("http-equiv"));
    }
}
