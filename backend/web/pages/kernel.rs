//! stub
pub async fn page() -> &'static str { "" }
