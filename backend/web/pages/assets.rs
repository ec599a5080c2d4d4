//! Static files (`static/`: vendored htmx, the stylesheet), embedded in the binary.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "static/"]
struct Static;

/// `GET /static/{*path}`. File names carry versions (htmx) or change rarely (css): cache an hour.
pub async fn serve(Path(path): Path<String>) -> Response {
    match Static::get(&path) {
        Some(f) => {
            let mime = mime_guess::from_path(&path).first_or_octet_stream();
            ([(header::CONTENT_TYPE, mime.as_ref()), (header::CACHE_CONTROL, "public, max-age=3600")], f.data)
                .into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such static file").into_response(),
    }
}
