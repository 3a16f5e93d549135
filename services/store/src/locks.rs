//! Session-level PostgreSQL advisory locks, the statements behind control's
//! singleton and feature locks (find-or-create across replicas). A lock is
//! keyed by a class and a name hashed into the second key. Must never be
//! taken on a pooled tenant transaction: it belongs to the session, so the
//! caller holds a dedicated connection, and closing that connection is what
//! releases a lock an unlock could not.

use crate::error::StoreError;

/// Wait for and take the lock `(class, hashtext(name))` on `conn`'s session.
pub async fn lock(conn: &mut sqlx::PgConnection, class: i32, name: &str) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_advisory_lock($1, hashtext($2))")
        .bind(class)
        .bind(name)
        .execute(conn)
        .await?;
    Ok(())
}

/// Release the lock `(class, hashtext(name))` on `conn`'s session; returns
/// whether the session held it. An error leaves the lock to the session's
/// end: the caller should close the connection.
pub async fn unlock(
    conn: &mut sqlx::PgConnection,
    class: i32,
    name: &str,
) -> Result<bool, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT pg_advisory_unlock($1, hashtext($2))")
            .bind(class)
            .bind(name)
            .fetch_one(conn)
            .await?,
    )
}
