//! The store a [`super::Db`] serves from: an SQLite file or a PostgreSQL database, behind one
//! set of types. Every query of `db/` and `answers/` is written once, in SQLite's dialect, and
//! runs through sqlx's `Any` driver on either store; [`Store`] (a pool), [`Conn`] (one
//! connection) and [`Tx`] (a transaction) are its executors. On PostgreSQL each statement is
//! first spelled in PostgreSQL's dialect by [`super::dialect::to_pg`]; on SQLite it goes as
//! written. The functions SQLite has and PostgreSQL lacks (`group_concat`, `json_each`, …) are
//! defined by the PostgreSQL migrations (`migrations-pg/0062_sqlite_functions.sql`).

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt, TryFutureExt, TryStreamExt};
use sqlx::AnyConnection;
use sqlx::any::{Any, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::{AssertSqlSafe, Either, Execute, Executor, SqlSafeStr, SqlStr};
use std::ops::{Deref, DerefMut};

/// Which store a pool or connection talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

impl Kind {
    /// The store of a connection, by its driver's name.
    pub fn of(conn: &AnyConnection) -> Kind {
        match conn.backend_name() {
            "PostgreSQL" => Kind::Postgres,
            _ => Kind::Sqlite,
        }
    }
}

/// A pool of connections to one store.
#[derive(Clone, Debug)]
pub struct Store {
    pool: sqlx::AnyPool,
    kind: Kind,
    /// The SQLite file (none on PostgreSQL).
    file: Option<std::sync::Arc<std::path::Path>>,
}

impl Store {
    pub fn sqlite(pool: sqlx::AnyPool, file: &std::path::Path) -> Store {
        Store { pool, kind: Kind::Sqlite, file: Some(file.into()) }
    }

    pub fn postgres(pool: sqlx::AnyPool) -> Store {
        Store { pool, kind: Kind::Postgres, file: None }
    }

    /// The SQLite file this store is; none on PostgreSQL.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The pool itself, for what needs no dialect (closing, sizes).
    pub fn any(&self) -> &sqlx::AnyPool {
        &self.pool
    }

    /// One connection of the pool, held until dropped.
    pub async fn acquire(&self) -> sqlx::Result<Pooled> {
        Ok(Pooled(Conn(Inner::Pooled(self.pool.acquire().await?))))
    }

    /// A transaction on a connection of the pool.
    pub async fn begin(&self) -> sqlx::Result<Tx<'static>> {
        Ok(Tx::of(self.pool.begin().await?))
    }

    /// A writing transaction: SQLite's `BEGIN IMMEDIATE` (the database's write lock taken at
    /// once); on PostgreSQL a transaction holding [`WRITER_LOCK`] until it ends, so that writers
    /// take turns there as they do on SQLite, whatever process they are in.
    pub async fn begin_write(&self) -> sqlx::Result<Tx<'static>> {
        let mut tx = match self.kind {
            Kind::Sqlite => Tx::of(self.pool.begin_with("BEGIN IMMEDIATE").await?),
            Kind::Postgres => Tx::of(self.pool.begin().await?),
        };
        tx.lock_writer().await?;
        Ok(tx)
    }

    pub async fn close(&self) {
        self.pool.close().await
    }
}

/// The advisory lock every writing transaction on PostgreSQL holds: one writer at a time per
/// database, as SQLite's write lock gives.
pub const WRITER_LOCK: i64 = 0x6361_6368_656c_656e; // "cachelen"

/// One connection (held from the pool, or a transaction on one), whose statements are spelled
/// for its store. `'c` is how long a transaction borrows the connection it runs on.
#[derive(Debug)]
pub struct Conn<'c>(Inner<'c>);

#[derive(Debug)]
enum Inner<'c> {
    Pooled(sqlx::pool::PoolConnection<Any>),
    Tx(sqlx::Transaction<'c, Any>),
}

impl Conn<'_> {
    fn any(&mut self) -> &mut AnyConnection {
        match &mut self.0 {
            Inner::Pooled(c) => c,
            Inner::Tx(t) => t,
        }
    }

    pub fn kind(&self) -> Kind {
        match &self.0 {
            Inner::Pooled(c) => Kind::of(c),
            Inner::Tx(t) => Kind::of(t),
        }
    }

    /// A transaction (a savepoint inside one) on this connection.
    pub async fn begin(&mut self) -> sqlx::Result<Tx<'_>> {
        Ok(Tx(Conn(Inner::Tx(sqlx::Connection::begin(self.any()).await?))))
    }

    /// [`Store::begin_write`] on this connection.
    pub async fn begin_write(&mut self) -> sqlx::Result<Tx<'_>> {
        let kind = self.kind();
        let conn = self.any();
        let mut tx = Tx(Conn(Inner::Tx(match kind {
            Kind::Sqlite => sqlx::Connection::begin_with(conn, "BEGIN IMMEDIATE").await?,
            Kind::Postgres => sqlx::Connection::begin(conn).await?,
        })));
        tx.lock_writer().await?;
        Ok(tx)
    }
}

/// A connection held from a [`Store`]'s pool until dropped.
#[derive(Debug)]
pub struct Pooled(Conn<'static>);

impl Deref for Pooled {
    type Target = Conn<'static>;
    fn deref(&self) -> &Conn<'static> {
        &self.0
    }
}

impl DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Conn<'static> {
        &mut self.0
    }
}

/// A transaction; rolled back when dropped uncommitted.
#[derive(Debug)]
pub struct Tx<'c>(Conn<'c>);

impl<'c> Tx<'c> {
    fn of(t: sqlx::Transaction<'c, Any>) -> Tx<'c> {
        Tx(Conn(Inner::Tx(t)))
    }

    pub async fn commit(self) -> sqlx::Result<()> {
        match self.0.0 {
            Inner::Tx(t) => t.commit().await,
            Inner::Pooled(_) => unreachable!("a Tx is made of a transaction only (Tx::of)"),
        }
    }

    pub async fn rollback(self) -> sqlx::Result<()> {
        match self.0.0 {
            Inner::Tx(t) => t.rollback().await,
            Inner::Pooled(_) => unreachable!("a Tx is made of a transaction only (Tx::of)"),
        }
    }

    async fn lock_writer(&mut self) -> sqlx::Result<()> {
        if self.kind() == Kind::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(WRITER_LOCK).execute(self.0.any()).await?;
        }
        Ok(())
    }
}

impl<'c> Deref for Tx<'c> {
    type Target = Conn<'c>;
    fn deref(&self) -> &Conn<'c> {
        &self.0
    }
}

impl<'c> DerefMut for Tx<'c> {
    fn deref_mut(&mut self) -> &mut Conn<'c> {
        &mut self.0
    }
}

/// The statement `query` carries, spelled for `kind`, with its arguments: what is handed to the
/// driver. On SQLite nothing is rebuilt.
enum Spelled<E> {
    AsIs(E),
    /// With its text, to log when PostgreSQL refuses it.
    Rebuilt(sqlx::query::Query<'static, Any, sqlx::any::AnyArguments>, std::sync::Arc<str>),
    Raw(sqlx::RawSql),
}

fn spell<'q, E: Execute<'q, Any>>(kind: Kind, mut query: E) -> Result<Spelled<E>, sqlx::Error> {
    if kind == Kind::Sqlite {
        return Ok(Spelled::AsIs(query));
    }
    let mut args = query.take_arguments().map_err(sqlx::Error::Encode)?;
    if let Some(a) = args.as_mut() {
        null_doubles_as_doubles(a);
    }
    let persistent = query.persistent();
    let text: std::sync::Arc<str> = super::dialect::to_pg(query.sql().as_str()).into();
    let sql: SqlStr = AssertSqlSafe(text.clone()).into_sql_str();
    Ok(match args {
        Some(args) => Spelled::Rebuilt(sqlx::query_with(sql, args).persistent(persistent), text),
        None => Spelled::Raw(sqlx::raw_sql(sql)),
    })
}

/// sqlx 0.9.0's Any driver hands PostgreSQL a NULL double (`None::<f64>`) as a NULL `float4`, and
/// a NULL float as a `float8` (`AnyArguments::convert_into` has the two swapped). PostgreSQL
/// prepares a statement text once, with its first parameters' types: a statement first run with
/// a NULL double then refused every double after it ("incorrect binary data format"). Marked as
/// the other kind, a NULL double reaches it as `float8`. (No query binds an `f32`.)
fn null_doubles_as_doubles(args: &mut sqlx::any::AnyArguments) {
    use sqlx_core::any::{AnyTypeInfoKind, AnyValueKind};
    for v in args.values.0.iter_mut() {
        if let AnyValueKind::Null(k @ AnyTypeInfoKind::Double) = v {
            *k = AnyTypeInfoKind::Real;
        }
    }
}

/// A statement PostgreSQL refused, as spelled for it (`CACHELENS_LOG=cachelens::db::store=debug`).
fn failed(sql: &str, e: &sqlx::Error) {
    if matches!(e, sqlx::Error::Database(_)) {
        tracing::debug!(sql, "PostgreSQL refused a statement: {e}");
    }
}

/// The executor methods of [`Store`] and [`Conn`], each passing the statement, spelled for the
/// store, to the inner executor (`$inner`).
macro_rules! dialect_executor {
    ($ty:ty, $self:ident => $kind:expr, $inner:expr) => {
        impl<'c> Executor<'c> for $ty {
            type Database = Any;

            fn fetch_many<'e, 'q: 'e, E>(
                $self,
                query: E,
            ) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
            where
                'c: 'e,
                E: 'q + Execute<'q, Any>,
            {
                match spell($kind, query) {
                    Ok(Spelled::AsIs(q)) => $inner.fetch_many(q),
                    Ok(Spelled::Rebuilt(q, sql)) => {
                        $inner.fetch_many(q).inspect_err(move |e| failed(&sql, e)).boxed()
                    }
                    Ok(Spelled::Raw(q)) => $inner.fetch_many(q),
                    Err(e) => futures_util::stream::once(futures_util::future::ready(Err(e))).boxed(),
                }
            }

            fn fetch_optional<'e, 'q: 'e, E>(
                $self,
                query: E,
            ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
            where
                'c: 'e,
                E: 'q + Execute<'q, Any>,
            {
                match spell($kind, query) {
                    Ok(Spelled::AsIs(q)) => $inner.fetch_optional(q),
                    Ok(Spelled::Rebuilt(q, sql)) => {
                        $inner.fetch_optional(q).inspect_err(move |e| failed(&sql, e)).boxed()
                    }
                    Ok(Spelled::Raw(q)) => $inner.fetch_optional(q),
                    Err(e) => futures_util::future::ready(Err(e)).boxed(),
                }
            }

            fn prepare_with<'e>(
                $self,
                sql: SqlStr,
                parameters: &'e [AnyTypeInfo],
            ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>>
            where
                'c: 'e,
            {
                let sql = match $kind {
                    Kind::Sqlite => sql,
                    Kind::Postgres => AssertSqlSafe(super::dialect::to_pg(sql.as_str())).into_sql_str(),
                };
                $inner.prepare_with(sql, parameters)
            }

            fn describe<'e>(
                $self,
                sql: SqlStr,
            ) -> BoxFuture<'e, Result<sqlx::Describe<Any>, sqlx::Error>>
            where
                'c: 'e,
            {
                let sql = match $kind {
                    Kind::Sqlite => sql,
                    Kind::Postgres => AssertSqlSafe(super::dialect::to_pg(sql.as_str())).into_sql_str(),
                };
                $inner.describe(sql)
            }
        }
    };
}

dialect_executor!(&'c Store, self => self.kind, &self.pool);
dialect_executor!(&'c mut Conn<'_>, self => self.kind(), self.any());

/// sqlx's `Type`, `Encode` and `Decode` on the Any driver for an enum stored as its name
/// (`as_str`): the derive covers each driver but Any. A name no variant has is read as the
/// `else` variant when there is one, else refused.
#[macro_export]
macro_rules! stored_as_name {
    ($t:ty { $($v:path),+ $(,)? } $(else $other:path)?) => {
        impl sqlx::Type<sqlx::Any> for $t {
            fn type_info() -> sqlx::any::AnyTypeInfo {
                <str as sqlx::Type<sqlx::Any>>::type_info()
            }
            fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
                <str as sqlx::Type<sqlx::Any>>::compatible(ty)
            }
        }
        impl<'q> sqlx::Encode<'q, sqlx::Any> for $t {
            fn encode_by_ref(
                &self,
                buf: &mut <sqlx::Any as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<'q, sqlx::Any>>::encode(self.as_str(), buf)
            }
        }
        impl<'r> sqlx::Decode<'r, sqlx::Any> for $t {
            fn decode(v: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                let s = <&str as sqlx::Decode<'r, sqlx::Any>>::decode(v)?;
                $(if s == <$t>::as_str($v) {
                    return Ok($v);
                })+
                $(return Ok($other);)?
                #[allow(unreachable_code)]
                Err(format!("{s:?} is no {}", stringify!($t)).into())
            }
        }
    };
}

/// A truth value as either store gives it: PostgreSQL's booleans and SQLite's 0 and 1 (which
/// the Any driver will not read as `bool`). Read a column that is a condition (`EXISTS …`,
/// `a = b`) or a 0/1 flag as `Flag`, never as `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Flag(pub bool);

impl From<Flag> for bool {
    fn from(f: Flag) -> bool {
        f.0
    }
}

impl sqlx::Type<Any> for Flag {
    fn type_info() -> AnyTypeInfo {
        <bool as sqlx::Type<Any>>::type_info()
    }
    fn compatible(ty: &AnyTypeInfo) -> bool {
        <bool as sqlx::Type<Any>>::compatible(ty) || ty.kind().is_integer()
    }
}

impl<'r> sqlx::Decode<'r, Any> for Flag {
    fn decode(v: sqlx::any::AnyValueRef<'r>) -> Result<Flag, sqlx::error::BoxDynError> {
        use sqlx::ValueRef;
        if v.type_info().kind() == sqlx::any::AnyTypeInfoKind::Bool {
            Ok(Flag(<bool as sqlx::Decode<Any>>::decode(v)?))
        } else {
            Ok(Flag(<i64 as sqlx::Decode<Any>>::decode(v)? != 0))
        }
    }
}
