//! Upload tokens: shown once, stored only as a sha256 hash, each bound to one machine.

use super::Store;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::FromRow;

/// The stored form of a token.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Create a token for `machine`; returns the token (the only time it exists in clear).
pub async fn create(db: &super::Db, machine: &str) -> sqlx::Result<String> {
    let pool = db.pool();
    let bytes: [u8; 32] = rand::random();
    let token = format!("cl_{}", hex::encode(bytes));
    let _turn = super::write::turn(db).await;
    sqlx::query("INSERT INTO tokens(machine, token_hash, created_at) VALUES (?, ?, ?)")
        .bind(machine)
        .bind(hash(&token))
        .bind(super::now_ms())
        .execute(pool)
        .await?;
    Ok(token)
}

#[derive(Debug, Serialize, FromRow)]
pub struct TokenRow {
    pub id: i64,
    pub machine: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

pub async fn list(pool: &Store) -> sqlx::Result<Vec<TokenRow>> {
    sqlx::query_as("SELECT id, machine, created_at, revoked_at, last_used_at FROM tokens ORDER BY id")
        .fetch_all(pool)
        .await
}

/// Revoke by id; returns whether a live token was revoked.
pub async fn revoke(db: &super::Db, id: i64) -> sqlx::Result<bool> {
    let pool = db.pool();
    let _turn = super::write::turn(db).await;
    let r = sqlx::query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
        .bind(super::now_ms())
        .bind(id)
        .execute(pool)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Outcome of checking a bearer token.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// Valid: the machine it may upload for.
    Machine(String),
    Revoked,
    Unknown,
}

pub async fn check(pool: &Store, token: &str) -> sqlx::Result<Check> {
    let row: Option<(String, Option<i64>)> =
        sqlx::query_as("SELECT machine, revoked_at FROM tokens WHERE token_hash = ?")
            .bind(hash(token))
            .fetch_optional(pool)
            .await?;
    Ok(match row {
        None => Check::Unknown,
        Some((_, Some(_))) => Check::Revoked,
        Some((m, None)) => Check::Machine(m),
    })
}

/// Record that a token was just used for an upload (a write: in this process's turn, see
/// [`super::write`]).
pub async fn touch(db: &super::Db, token: &str) -> sqlx::Result<()> {
    let pool = db.pool();
    let _turn = super::write::turn(db).await;
    sqlx::query("UPDATE tokens SET last_used_at = ? WHERE token_hash = ?")
        .bind(super::now_ms())
        .bind(hash(token))
        .execute(pool)
        .await?;
    Ok(())
}
