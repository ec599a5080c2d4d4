//! Property tests ("fuzzing"): the upload decoder and the cache parsers must never panic.
//!
//! Inputs are arbitrary bytes and real corpus files with random bytes flipped, cut short or
//! spliced. `CACHELENS_FUZZ_CASES` sets the cases per property (default 64, enough for a test
//! run); `scripts/fuzz.sh` runs them with many more for a bounded time. A failing case is
//! saved by proptest under `proptest-regressions/` and replayed first on every later run.

use cachelens::scan::{entry, resources, ttir};
use cachelens::web::error::AppError;
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn cases() -> u32 {
    std::env::var("CACHELENS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

/// Real cache files by extension (ttir, cubin, amdgcn, json, autotune.json, grp), read once.
fn seeds() -> &'static Vec<(String, Vec<u8>)> {
    static SEEDS: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let t = tempfile::TempDir::new().unwrap().keep();
        let mut out = vec![];
        for a in ["h100-jit-3.6.0", "mi300-upgrade-1-triton-3.6.0"] {
            crate::common::unpack(a, &t);
            collect(&t.join(a), &mut out);
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    })
}

fn collect(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p: PathBuf = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
            let ext = cachelens::model::artifact_ext(name).to_string();
            if matches!(ext.as_str(), "ttir" | "source" | "cubin" | "amdgcn" | "json" | "autotune.json" | "grp") {
                out.push((ext, std::fs::read(&p).unwrap()));
            }
        }
    }
}

fn seeds_of(ext: &'static str) -> Vec<Vec<u8>> {
    let v: Vec<Vec<u8>> = seeds().iter().filter(|(e, _)| e == ext).map(|(_, b)| b.clone()).collect();
    assert!(!v.is_empty(), "no {ext} in the corpus");
    v
}

/// A real file with up to 8 random byte edits, maybe cut short.
fn mutated(ext: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let files = seeds_of(ext);
    (
        0..files.len(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        any::<Option<prop::sample::Index>>(),
    )
        .prop_map(move |(i, edits, cut)| {
            let mut b = files[i].clone();
            for (at, byte) in edits {
                if !b.is_empty() {
                    let j = at.index(b.len());
                    b[j] = byte;
                }
            }
            if let Some(c) = cut {
                b.truncate(c.index(b.len() + 1));
            }
            b
        })
}

/// Arbitrary bytes, or a mutated real file of that kind.
fn input(ext: &'static str) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![prop::collection::vec(any::<u8>(), 0..512), mutated(ext)]
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn is_4xx(e: &AppError) -> bool {
    e.status().is_client_error()
}

/// A valid upload body (JSON) from the corpus, computed once.
fn report_json() -> &'static Vec<u8> {
    static R: OnceLock<Vec<u8>> = OnceLock::new();
    R.get_or_init(|| {
        let (t, dir) = crate::common::unpacked("mi300-upgrade-1-triton-3.6.0");
        let r = cachelens::collect::scan_report(&dir.join("triton-cache"), "fuzz-node").unwrap();
        drop(t);
        serde_json::to_vec(&r).unwrap()
    })
}

/// Decode and check like the handler does; any failure must be a 4xx.
fn check_decoder(body: &[u8], gzip: bool, max: usize) -> Result<(), TestCaseError> {
    use cachelens::web::api::whole;
    let mut stage = whole::Memory::default();
    match whole::decode(body, gzip, max, &mut stage) {
        Ok(h) => {
            if let Err(e) = h.check("fuzz-node") {
                prop_assert!(is_4xx(&e), "check gave {e:?}");
            }
        }
        Err(e) => prop_assert!(is_4xx(&e), "decode gave {e:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn upload_decoder_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..2048), gzip in any::<bool>()) {
        check_decoder(&body, gzip, 1 << 20)?;
    }

    #[test]
    fn upload_decoder_mutated_reports(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<Option<prop::sample::Index>>(),
        gzip in any::<bool>(),
        flip_compressed in any::<Option<(prop::sample::Index, u8)>>(),
    ) {
        let mut b = report_json().clone();
        for (at, byte) in edits {
            let j = at.index(b.len());
            b[j] = byte;
        }
        if let Some(c) = cut {
            b.truncate(c.index(b.len() + 1));
        }
        if gzip {
            let mut z = crate::upload::gz(&b);
            if let Some((at, byte)) = flip_compressed {
                let j = at.index(z.len());
                z[j] ^= byte;
            }
            b = z;
        }
        check_decoder(&b, gzip, 64 << 20)?;
        // and with a cap below the report's size: 413, never a panic
        check_decoder(&b, gzip, 4096)?;
    }

    #[test]
    fn parse_py_json_never_panics(b in input("json")) {
        let _ = entry::parse_py_json(&text(&b));
    }

    #[test]
    fn parse_autotune_never_panics(b in input("autotune.json")) {
        let _ = entry::parse_autotune(&text(&b));
    }

    #[test]
    fn parse_group_never_panics(b in input("grp")) {
        let _ = entry::parse_group(&text(&b), Path::new("/nonexistent/cache/KEY"));
    }

    #[test]
    fn from_cubin_never_panics(b in input("cubin"), kernel in prop::option::of("[a-z_]{1,12}")) {
        let _ = resources::from_cubin(&b, kernel.as_deref());
    }

    #[test]
    fn from_amdgcn_never_panics(b in input("amdgcn"), kernel in prop::option::of("[a-z_]{1,12}")) {
        let _ = resources::from_amdgcn(&text(&b), kernel.as_deref());
    }

    #[test]
    fn ttir_facts_never_panic(b in input("ttir"), kernel in prop::option::of("[a-z_]{1,12}")) {
        let _ = ttir::facts(&text(&b), kernel.as_deref());
    }
}

/// The whole HTTP path (auth, size caps, gzip, JSON, validation, ingest) on arbitrary bodies:
/// always a 4xx (or 201 for a body that happens to be a valid report), never a 5xx or a panic.
#[test]
fn upload_endpoint_answers_4xx_to_garbage() {
    use tower::ServiceExt;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_dir, pool) = rt.block_on(crate::common::fresh_db());
    let store = cachelens::db::Db::from(pool.clone());
    let token = rt.block_on(cachelens::db::tokens::create(&store, "fuzz-node")).unwrap();
    let cfg = cachelens::web::Config { max_upload_bytes: 1 << 20, ..Default::default() };
    let app = cachelens::web::app(cachelens::web::AppState::new(pool.clone(), cfg));
    let mut runner =
        proptest::test_runner::TestRunner::new(ProptestConfig { cases: cases().min(256), ..ProptestConfig::default() });
    let strategy = (
        prop::collection::vec(any::<u8>(), 0..4096),
        any::<bool>(),
        prop::sample::select(vec!["/api/v1/scans", "/api/v1/blobs/missing"]),
    );
    runner
        .run(&strategy, |(body, gzip, path)| {
            let mut req = axum::http::Request::post(path).header("authorization", format!("Bearer {token}"));
            if gzip {
                req = req.header("content-encoding", "gzip");
            }
            let resp = rt.block_on(app.clone().oneshot(req.body(axum::body::Body::from(body)).unwrap())).unwrap();
            prop_assert!(resp.status().is_client_error() || resp.status().is_success(), "{}", resp.status());
            Ok(())
        })
        .unwrap();
    let scans: i64 = rt.block_on(sqlx::query_scalar("SELECT COUNT(*) FROM scans").fetch_one(&pool)).unwrap();
    assert_eq!(scans, 0);
}
