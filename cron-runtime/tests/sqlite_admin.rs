//! The operator API's shared suite (tests/admin) against the SQLite store: one fresh file per case, the
//! replica a store with its own pool on it, as in another process.
#![cfg(feature = "sqlite")]

use cron_runtime::admin::Admin;
use cron_runtime::store::sqlite::{SqliteStore, connect_options, pool_options};

use admin::AdminUnderTest;
use sqlite_support::TempDb;

mod admin;
mod sqlite_support;
mod support;

/// One file, migrated, and the operator API on it.
struct Sqlite {
    db: TempDb,
    admin: SqliteStore,
}

impl Sqlite {
    async fn new() -> Sqlite {
        let db = TempDb::new();
        let admin = SqliteStore::connect(&db.url).await.unwrap();
        admin.migrate().await.unwrap();
        Sqlite { db, admin }
    }
}

impl AdminUnderTest for Sqlite {
    type Store = SqliteStore;

    fn replica(&self) -> SqliteStore {
        SqliteStore::from_pool(
            pool_options().connect_lazy_with(connect_options(&self.db.url).unwrap()),
        )
    }

    fn admin(&self) -> Admin {
        self.admin.admin()
    }
}

every_admin_case!(tokio::test, (), Sqlite::new().await);
