//! stub
pub async fn page() -> &'static str { "" }
pub async fn raw() -> &'static str { "" }
