//! The function files under `services/store/sql/` are the truth: a migrated
//! database defines exactly the functions those files hold, one definition
//! per name, each identical to its file. A function edited in its file
//! without a migration that includes it again, a function a migration
//! defines inline, or a stale overload fails here.

use genesis_store::migrations::{FUNCTION_FILES, defined_functions, function_file_mismatches};
use sqlx::PgPool;

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_function_in_a_migrated_database_is_its_file(pool: PgPool) {
    let defined = defined_functions(&pool).await.expect("read pg_proc");
    assert!(
        defined.iter().any(|f| f.name == "genesis_apply_complete"),
        "the migrated database has no tick functions: {defined:?}"
    );
    let problems = function_file_mismatches(&defined, FUNCTION_FILES);
    assert!(
        problems.is_empty(),
        "function files and database disagree:\n{}",
        problems.join("\n")
    );
}
