//! Upload tokens from the command line, and the read-token restriction of `serve`.

use crate::common::*;
use crate::upload::{cli_upload, get_json_at, post_raw, server, text};
use cachelens::web::Config;
use std::path::Path;

fn cachelens(args: &[&str], db: &Path) -> std::process::Output {
    std::process::Command::new(bin()).args(args).arg("--db").arg(db).env_remove("CACHELENS_DB").output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_create_list_revoke() {
    let (_dir, db) = fresh_db_at().await;
    let out = cachelens(&["token", "create", "--machine", "node-7"], &db);
    assert!(out.status.success(), "{:?}", text(&out));
    let (stdout, _) = text(&out);
    // the token alone on stdout: scripts do TOKEN=$(cachelens token create ...)
    let token = stdout.strip_suffix('\n').unwrap();
    assert!(token.starts_with("cl_") && token.len() > 40 && !token.contains(char::is_whitespace), "{stdout:?}");
    let second = text(&cachelens(&["token", "create", "--machine", "node-8"], &db)).0;
    assert_ne!(second.trim(), token);
    // stored only as a hash
    let pool = cachelens::db::open(&db).await.unwrap();
    assert!(!db_holds(&db, token).await, "token in clear in the db");
    let hashes: Vec<String> = sqlx::query_scalar("SELECT token_hash FROM tokens").fetch_all(&pool).await.unwrap();
    assert!(hashes.contains(&cachelens::db::tokens::hash(token)));
    // list: ids, machines, state; never the token
    let list = text(&cachelens(&["token", "list"], &db)).0;
    assert!(list.contains("node-7") && list.contains("node-8") && list.contains("active"), "{list}");
    assert!(!list.contains(token) && !list.contains(&hashes[0]), "{list}");
    // revoke: once; a second time or an unknown id fails
    let out = cachelens(&["token", "revoke", "1"], &db);
    assert!(out.status.success() && text(&out).0.contains("revoked token 1"));
    let list = text(&cachelens(&["token", "list"], &db)).0;
    let line = list.lines().find(|l| l.contains("node-7")).unwrap();
    assert!(line.contains("revoked"), "{list}");
    for id in ["1", "99"] {
        let out = cachelens(&["token", "revoke", id], &db);
        assert_eq!(out.status.code(), Some(1), "revoke {id}");
        assert!(text(&out).1.contains("no active token"));
    }
    // a machine name that is no name
    let out = cachelens(&["token", "create", "--machine", "../etc"], &db);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("invalid machine name"));
    assert_eq!(cachelens::db::tokens::check(&pool, token).await.unwrap(), cachelens::db::tokens::Check::Revoked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_uploads_only_for_its_machine_and_not_once_revoked() {
    let srv = server(Config::default()).await;
    let (_t, dir) = unpacked("mi300-upgrade-1-triton-3.6.0");
    let cache = dir.join("triton-cache");
    let token = cachelens::db::tokens::create(&srv.db, "mi300-a").await.unwrap();
    let out = cli_upload(&srv.url, &token, "mi300-b", &cache, &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("403"), "{:?}", text(&out));
    let out = cli_upload(&srv.url, &token, "mi300-a", &cache, &[]).await;
    assert!(out.status.success(), "{:?}", text(&out));
    let id = cachelens::db::tokens::list(&srv.pool).await.unwrap()[0].id;
    assert!(cachelens::db::tokens::list(&srv.pool).await.unwrap()[0].last_used_at.is_some());
    cachelens::db::tokens::revoke(&srv.db, id).await.unwrap();
    let out = cli_upload(&srv.url, &token, "mi300-a", &cache, &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let (_, stderr) = text(&out);
    assert!(stderr.contains("401") && stderr.contains("revoked") && !stderr.contains("retrying"), "{stderr}");
    let scans: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM scans").fetch_one(&srv.pool).await.unwrap();
    assert_eq!(scans, 1);
}

/// A token's last use is an upload that was stored: one refused, or one whose ingest failed
/// (here an injected database error), leaves it untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_stored_upload_marks_its_token_used() {
    let srv = server(Config::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "t-used").await.unwrap();
    let last_used = || async { cachelens::db::tokens::list(&srv.pool).await.unwrap()[0].last_used_at };
    let report = |machine: &str| {
        serde_json::to_vec(&serde_json::json!({"format": 1, "client_id": "c1", "machine": machine, "root": "/cache",
                                               "scanned_at": 1_700_000_000_000i64, "duration_ms": 1, "entries": []}))
        .unwrap()
    };
    let (status, _) = post_raw(&srv.url, "/api/v1/scans", Some(&token), report("other"), false).await;
    assert_eq!(status, 403);
    assert_eq!(last_used().await, None);
    let (fail, unfail) = match on_postgres() {
        true => (
            "CREATE FUNCTION fail_scan() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$;
             CREATE TRIGGER fail_scan BEFORE UPDATE ON scans FOR EACH ROW EXECUTE FUNCTION fail_scan()",
            "DROP TRIGGER fail_scan ON scans",
        ),
        false => (
            "CREATE TRIGGER fail_scan BEFORE UPDATE ON scans BEGIN SELECT RAISE(ABORT, 'injected'); END",
            "DROP TRIGGER fail_scan",
        ),
    };
    sqlx::raw_sql(fail).execute(srv.pool.any()).await.unwrap();
    let (status, _) = post_raw(&srv.url, "/api/v1/scans", Some(&token), report("t-used"), false).await;
    assert_eq!(status, 500);
    assert_eq!(last_used().await, None, "a failed upload is not a use");
    let scans: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM scans").fetch_one(&srv.pool).await.unwrap();
    assert_eq!(scans, 0);
    sqlx::raw_sql(unfail).execute(srv.pool.any()).await.unwrap();
    let (status, _) = post_raw(&srv.url, "/api/v1/scans", Some(&token), report("t-used"), false).await;
    assert_eq!(status, 201);
    assert!(last_used().await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_token_guards_pages_and_api_but_not_uploads() {
    let srv = server(Config { read_token: Some("r3ad-s3cret-0123456789".into()), ..Config::default() }).await;
    let http = cachelens::upload::client().unwrap();
    let api = format!("{}/api/v1/machines", srv.url);
    let status = |r: reqwest::Response| r.status().as_u16();
    // nothing, a wrong token, a machine's upload token: 401 with JSON and a basic-auth prompt
    let upload_token = cachelens::db::tokens::create(&srv.db, "n1").await.unwrap();
    for auth in [None, Some("wrong"), Some(upload_token.as_str())] {
        let mut req = http.get(&api);
        if let Some(t) = auth {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 401, "{auth:?}");
        assert!(r.headers()["www-authenticate"].to_str().unwrap().starts_with("Basic"));
        let v: serde_json::Value = r.json().await.unwrap();
        assert!(v["error"].as_str().unwrap().contains("read token"));
    }
    // pages too (any path, even one that does not exist: the rule is the read router's layer)
    for path in ["/", "/no-such-page", "/static/style.css", "/api/v1/no-such-endpoint"] {
        assert_eq!(status(http.get(format!("{}{path}", srv.url)).send().await.unwrap()), 401, "{path}");
    }
    // bearer, basic auth password, cookie from /login
    assert_eq!(status(http.get(&api).bearer_auth("r3ad-s3cret-0123456789").send().await.unwrap()), 200);
    assert_eq!(status(http.get(&api).basic_auth("anyone", Some("r3ad-s3cret-0123456789")).send().await.unwrap()), 200);
    assert_eq!(status(http.get(&api).basic_auth("anyone", Some("nope")).send().await.unwrap()), 401);
    let no_redirect = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = no_redirect.get(format!("{}/login?token=wrong", srv.url)).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("set-cookie").is_none());
    let r = no_redirect.get(format!("{}/login?token=r3ad-s3cret-0123456789", srv.url)).send().await.unwrap();
    assert!(r.status().is_redirection());
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    // the cookie holds a value derived from the token, never the token
    assert!(cookie.starts_with("cachelens_read=") && !cookie.contains("r3ad-s3cret"), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
    let pair = cookie.split(';').next().unwrap();
    assert_eq!(status(http.get(&api).header("cookie", pair).send().await.unwrap()), 200);
    // the raw token, an empty cookie or an empty basic-auth password do not get in
    for bad in ["cachelens_read=r3ad-s3cret-0123456789", "cachelens_read=", "cachelens_read"] {
        assert_eq!(status(http.get(&api).header("cookie", bad).send().await.unwrap()), 401, "{bad}");
    }
    assert_eq!(status(http.get(&api).basic_auth("x", Some("")).send().await.unwrap()), 401);
    // uploads use their machine token, read token or not
    let (_t, dir) = unpacked("mi300-upgrade-1-triton-3.6.0");
    let out = cli_upload(&srv.url, &upload_token, "n1", &dir.join("triton-cache"), &[]).await;
    assert!(out.status.success(), "{:?}", text(&out));
    let (s, _) = post_raw(&srv.url, "/api/v1/scans", Some("r3ad-s3cret-0123456789"), b"{}".to_vec(), false).await;
    assert_eq!(s, 401, "the read token is no upload token");
    let machines = http
        .get(&api)
        .bearer_auth("r3ad-s3cret-0123456789")
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(machines[0]["name"], "n1");
    // without a read token, reading is open
    let open = server(Config::default()).await;
    get_json_at(&format!("{}/api/v1/machines", open.url)).await;
}

/// A `--db` that is a URL is a store's: a PostgreSQL URL is connected to (and an unreachable
/// one is an error naming it), any other scheme is refused at once. Neither creates anything: a
/// URL was once taken as a file path (`./postgres:/u@host:5432/db`) and served as an empty
/// SQLite database.
#[test]
fn a_db_url_is_a_store_and_creates_no_file() {
    let dir = tempfile::TempDir::new().unwrap();
    for (args, says) in [
        (
            vec!["serve", "--db", "postgres://u@no-such-host.invalid:5432/db", "--listen", "127.0.0.1:0"],
            "cannot connect to postgres://u@no-such-host.invalid:5432/db",
        ),
        (
            vec!["token", "create", "--machine", "m", "--db", "postgresql://u@no-such-host.invalid/db"],
            "cannot connect to postgresql://",
        ),
        (vec!["scan", ".", "--db", "mysql://u@host/db"], "which this build does not have"),
    ] {
        let out = std::process::Command::new(bin()).args(&args).current_dir(dir.path()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "created {left:?}");
}

/// `token create` prints the token alone on stdout and says on stderr which database holds it.
#[test]
fn token_create_says_which_database_it_wrote_to() {
    let (_dir, db) = fresh_db_at_blocking();
    let out = std::process::Command::new(bin())
        .args(["token", "create", "--machine", "gpu-1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.trim().starts_with("cl_"), "{stdout}");
    assert!(stderr.contains(&format!("stored in {}", db.display())) && stderr.contains("gpu-1"), "{stderr}");
}
