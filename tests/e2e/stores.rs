//! What either store must answer alike, asked of the test PostgreSQL directly (the other e2e
//! tests run on it with `CACHELENS_TEST_STORE=postgres`).

use crate::common::new_pg_database;

/// One statement text run first with a NULL double, then with doubles: PostgreSQL prepares it
/// once with its first parameters' types, and each run stores what it was given (sqlx 0.9.0's
/// Any driver would have typed the NULL as a `float4`: `db::store`).
#[tokio::test]
async fn a_null_double_first_leaves_the_statement_taking_doubles() {
    let Some(url) = new_pg_database("binds").await else { return };
    let store = cachelens::db::open(std::path::Path::new(&url)).await.unwrap();
    sqlx::query("CREATE TABLE t (seq INTEGER, ms REAL)").execute(&store).await.unwrap();
    let values = [None, Some(1735.05_f64), Some(-0.25), None, Some(1e300)];
    for (seq, ms) in values.iter().enumerate() {
        sqlx::query("INSERT INTO t(seq, ms) VALUES (?, ?)").bind(seq as i64).bind(*ms).execute(&store).await.unwrap();
    }
    let back: Vec<Option<f64>> = sqlx::query_scalar("SELECT ms FROM t ORDER BY seq").fetch_all(&store).await.unwrap();
    assert_eq!(back, values);
}
