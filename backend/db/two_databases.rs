//! Two databases in one process share none of their state: each [`Db`] owns its writers' queue
//! and every cache, and filling one's leaves the other's empty.

use super::Db;
use crate::answers::load::{DiffSlots, compare_ids, nearest_cached};

/// Two real SQLite files, one scanned (a real Triton cache) and asked everything that keeps
/// something (memoised answers, IR texts, key sets, prepared texts, line diffs, nearest
/// classes); the other keeps nothing, answers from its own data only, and takes its own turn to
/// write while the first's turn is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_databases_share_no_state() {
    let dir = tempfile::TempDir::new().unwrap();
    let a = Db::open(&dir.path().join("a.db")).await.unwrap();
    let b = Db::open(&dir.path().join("b.db")).await.unwrap();
    let root = crate::test_corpus::unpacked("h100-jit-3.6.0").join("triton-cache");
    crate::collect::scan_local(&a, &root, "m1").await.unwrap();

    // Two variants of one kernel (their IR differs), compared in full: texts read, prepared, diffed.
    let pair: (String, String) = sqlx::query_as(
        "SELECT MIN(key), MAX(key) FROM entry_rows WHERE kernel IS NOT NULL AND kind = 'kernel'
         GROUP BY kernel HAVING COUNT(*) > 1 ORDER BY kernel LIMIT 1",
    )
    .fetch_one(a.pool())
    .await
    .unwrap();
    let (x, y) = (format!("m1:{}", pair.0), format!("m1:{}", pair.1));
    let slots = DiffSlots::default();
    let r = compare_ids(&a, &slots, &x, &y, None, true).await.unwrap();
    assert_eq!(r.kernel_a, r.kernel_b);
    nearest_cached(&a, a.nearest_cache(), &x, 5).await.unwrap();
    crate::db::keysets::current(&a, "m1").await.unwrap();
    assert!(a.memo("entries".into(), entries(&a)).await.unwrap() > 0);

    let [memos, _, texts, keysets, prepared, diffs, rows, sides] = a.kept();
    for (what, n) in [
        ("memo", memos),
        ("texts", texts),
        ("keysets", keysets),
        ("prepared", prepared),
        ("diffs", diffs),
        ("nearest rows", rows),
        ("nearest sides", sides),
    ] {
        assert!(n > 0, "the scanned database keeps {what}: {:?}", a.kept());
    }
    assert_eq!(b.kept(), [0; 8], "the other database keeps nothing");

    // Its answers are its own: the entries of the first are unknown to it.
    let e = compare_ids(&b, &slots, &x, &y, None, true).await.unwrap_err();
    assert!(matches!(e, crate::answers::load::ExplainError::NotFound(_)), "{e}");
    assert_eq!(b.memo("entries".into(), entries(&b)).await.unwrap(), 0);
    assert!(crate::db::keysets::current(&b, "m1").await.unwrap().is_empty());
    assert_eq!(b.kept()[3], 0, "no key sets of an unknown machine");

    // Each database's writers queue apart: the first's turn held, the second's is free.
    let held = super::write::turn(&a).await;
    assert!(super::write::turn_now(&a).is_none(), "the first's writers wait");
    assert!(super::write::turn_now(&b).is_some(), "the second's do not");
    drop(held);
    // A clone is the same database: the same queue.
    let held = super::write::turn(&b).await;
    assert!(super::write::turn_now(&b.clone()).is_none());
    drop(held);
}

async fn entries(db: &Db) -> sqlx::Result<i64> {
    sqlx::query_scalar("SELECT COUNT(*) FROM entry_rows").fetch_one(db.pool()).await
}
