//! The `/autotune` pages on the real Inductor max-autotune cache (H100 fixture), served by the
//! real binary on loopback: each decision's winner and margin as computed here from the raw
//! autotune JSON, the choice → entry link checked against the generated module's own config,
//! and the "no evidence" wording for a choice whose compiled entry is gone.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const FIXTURE: &str = "h100-inductor-autotune-triton-3.6.0";

/// Scan `dir` as machine `at` with the CLI into `db`, then serve `db` on a free loopback port.
fn scan_and_serve(dir: &Path, db: &Path) -> (Served, String) {
    let out = Command::new(bin()).args(["scan", "--machine", "at", "--db"]).arg(db).arg(dir).output().unwrap();
    assert!(out.status.success(), "scan: {}", String::from_utf8_lossy(&out.stderr));
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--db"]).arg(db);
    spawn_served(cmd, 120)
}

/// One decision of the raw file: (op, key, choices fastest first; a failed one has no time).
type Raw = (String, String, Vec<(String, Option<f64>)>);

/// The decisions of the fixture's `cache/<hash>`, read here from the JSON itself.
fn raw_decisions(dir: &Path) -> Vec<Raw> {
    let file = std::fs::read_dir(dir.join("cache")).unwrap().next().unwrap().unwrap().path();
    let raw = std::fs::read_to_string(file).unwrap().replace(": Infinity", ": null");
    let v: Value = serde_json::from_str(&raw).unwrap();
    let mut out = vec![];
    for (op, keys) in v["cache"].as_object().unwrap() {
        for (key, precs) in keys.as_object().unwrap() {
            for choices in precs.as_object().unwrap().values() {
                let mut c: Vec<(String, Option<f64>)> =
                    choices.as_object().unwrap().iter().map(|(n, ms)| (n.clone(), ms.as_f64())).collect();
                c.sort_by(|a, b| a.1.unwrap_or(f64::INFINITY).total_cmp(&b.1.unwrap_or(f64::INFINITY)));
                out.push((op.clone(), key.clone(), c));
            }
        }
    }
    out
}

/// `0.0002 ms (0.8%)`: the runner-up's time minus the winner's, and that in % of the winner's.
fn margin(c: &[(String, Option<f64>)]) -> String {
    let (w, r) = (c[0].1.unwrap(), c[1].1.unwrap());
    format!("{:.4} ms ({:.1}%)", r - w, (r - w) / w * 100.0)
}

/// The Triton cache entry dir whose TTIR names Inductor module `stem` as its source.
fn entry_dir_of(dir: &Path, stem: &str) -> Vec<String> {
    let mut out = vec![];
    for d in std::fs::read_dir(dir.join("triton/0")).unwrap() {
        let d = d.unwrap().path();
        for f in std::fs::read_dir(&d).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "source") {
                let first = std::fs::read_to_string(&f).unwrap().lines().next().unwrap_or("").to_string();
                if first.contains(&format!("/{stem}.py\"")) {
                    out.push(d.file_name().unwrap().to_string_lossy().into_owned());
                }
            }
        }
    }
    out
}

/// (num_warps, num_stages, BLOCK_M, BLOCK_N, BLOCK_K) as the generated module itself says.
fn module_config(dir: &Path, stem: &str) -> (i64, i64, i64, i64, i64) {
    let py = std::fs::read_to_string(dir.join(&stem[1..3]).join(format!("{stem}.py"))).unwrap();
    let int_after = |pat: &str| -> i64 {
        let at = py.find(pat).unwrap_or_else(|| panic!("{pat} in {stem}.py")) + pat.len();
        py[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
    };
    (
        int_after("num_warps="),
        int_after("num_stages="),
        int_after("'BLOCK_M': "),
        int_after("'BLOCK_N': "),
        int_after("'BLOCK_K': "),
    )
}

async fn page(http: &reqwest::Client, url: &str) -> String {
    let r = http.get(url).send().await.unwrap();
    assert_eq!(r.status(), 200, "GET {url}");
    r.text().await.unwrap()
}

/// The first link of an HTML table row.
fn first_href(row: &str) -> String {
    let h = &row[row.find("href=\"").unwrap_or_else(|| panic!("a link in {row}")) + 6..];
    h[..h.find('"').unwrap()].to_string()
}

#[tokio::test]
async fn decisions_winners_margins_and_links_on_the_real_fixture() {
    let (t, dir) = unpacked(FIXTURE);
    let raw = raw_decisions(&dir);
    assert_eq!(raw.len(), 4);
    // a choice whose compiled entry is gone (a pruned cache): the runner-up of the first decision
    let pruned = raw[0].2[1].0.clone();
    let pruned_stem = pruned.rsplit_once('-').unwrap().1.to_string();
    let gone = entry_dir_of(&dir, &pruned_stem);
    assert_eq!(gone.len(), 1, "the fixture keeps one entry per Triton choice");
    std::fs::remove_dir_all(dir.join("triton/0").join(&gone[0])).unwrap();
    let (_server, url) = scan_and_serve(&dir, &t.path().join("a.db"));
    let http = cachelens::upload::client().unwrap();

    let machine = page(&http, &format!("{url}/machines/at")).await;
    assert!(machine.contains("href=\"/autotune?machine=at\"") && machine.contains("4 autotune decisions"), "{machine}");
    let list = page(&http, &format!("{url}/autotune?machine=at")).await;
    let rows: Vec<&str> = list.split("<tr class=\"decision\">").skip(1).collect();
    assert_eq!(rows.len(), 4);
    for (_, _, c) in &raw {
        let winner = &c[0].0;
        let row = rows.iter().find(|r| r.contains(&format!(">{winner}</a>"))).unwrap_or_else(|| panic!("{winner}"));
        assert!(row.contains(&format!("<td class=\"n margin\">{}</td>", margin(c))), "{row}");
        assert!(row.contains(&format!(">{}</td>", c[1].0)), "runner-up in {row}");
        assert!(row.contains(">triton</span>") && row.contains(&format!("<td class=\"n\">{}</td>", c.len())), "{row}");
    }
    // the JSON API carries the same figures
    let api: Value = http.get(format!("{url}/api/v1/autotune?machine=at")).send().await.unwrap().json().await.unwrap();
    for r in api.as_array().unwrap() {
        let c = &raw.iter().find(|d| d.1 == r["key"]).unwrap().2;
        assert_eq!((r["winner"].as_str(), r["runner_up"].as_str()), (Some(c[0].0.as_str()), Some(c[1].0.as_str())));
        let want = c[1].1.unwrap() - c[0].1.unwrap();
        assert!((r["margin_ms"].as_f64().unwrap() - want).abs() < 1e-12, "{r}");
        assert_eq!(r["winner_kind"], "triton");
    }

    // the first decision's page: the winner links to the entry compiled from its module, whose
    // num_warps, num_stages and tile shapes are the module's config
    let (_, _, c) = &raw[0];
    let winner = &c[0].0;
    let list_row = rows.iter().find(|r| r.contains(&format!(">{winner}</a>"))).unwrap();
    let decision = page(&http, &format!("{url}{}", first_href(list_row))).await;
    let rows: Vec<&str> = decision.split("<tr class=\"choice").skip(1).collect();
    assert_eq!(rows.len(), c.len());
    let win_row = rows[0];
    assert!(win_row.contains("winner") && win_row.contains(winner.as_str()), "{win_row}");
    let stem = winner.rsplit_once('-').unwrap().1;
    let keys = entry_dir_of(&dir, stem);
    assert_eq!(keys.len(), 1);
    let entry_href = first_href(win_row);
    assert_eq!(entry_href, format!("/entries/at/{}", keys[0]));
    let entry = page(&http, &format!("{url}{entry_href}")).await;
    let (warps, stages, bm, bn, bk) = module_config(&dir, stem);
    assert!(entry.contains(&format!("<dd>{warps} / {stages} / ")), "num_warps {warps} num_stages {stages}: {entry}");
    let shapes = &entry[entry.find("<dt>shapes</dt><dd>").unwrap() + 19..];
    let shapes: Vec<&str> = shapes[..shapes.find("</dd>").unwrap()].split(',').collect();
    for s in [format!("{bm}x{bn}"), format!("{bm}x{bk}"), format!("{bk}x{bn}")] {
        assert!(shapes.contains(&s.as_str()), "{s} in {shapes:?}");
    }
    assert!(entry.contains(&format!("{winner} in addmm")) && entry.contains(": won</a>"), "the entry's decision");
    // the pruned runner-up: no evidence, said plainly; aten choices: no Triton entry
    let ru_row = rows[1];
    assert!(ru_row.contains(&pruned) && !ru_row.contains("entry-link"), "{ru_row}");
    assert!(
        ru_row.contains(&format!(
            "no evidence: no live entry of this machine was compiled from Inductor module {pruned_stem}.py"
        )),
        "{ru_row}"
    );
    let aten = rows.iter().find(|r| r.contains("addmm-alpha=1")).unwrap();
    assert!(aten.contains("aten extern kernel") && !aten.contains("entry-link"), "{aten}");
    assert!(rows[2].contains("compiled from Inductor module") && rows[2].contains("entry-link"), "{}", rows[2]);

    // the kernel page of triton_mm: the four shapes it won, by the margins above
    let kernel = page(&http, &format!("{url}/kernels/triton_mm")).await;
    let won: Vec<&str> = kernel.split("kernel-decision\">").skip(1).collect();
    assert_eq!(won.len(), 4, "{kernel}");
    for (_, _, c) in &raw {
        let row = won.iter().find(|r| r.contains(&format!(">{}</td>", c[0].0))).unwrap();
        assert!(row.contains(&format!("won by {} over {}", margin(c), c[1].0)), "{row}");
    }
}

/// Triton's `.autotune.json` configs on `/autotune` read as block sizes, warps and stages (each
/// value from the raw config the API returns), never as raw JSON; the raw config stays in the
/// cell's title.
#[tokio::test]
async fn triton_configs_read_as_block_sizes_warps_and_stages() {
    let (keep, pool) = corpus_db(&[("h100-a", "h100-jit-3.6.0", "triton-cache")]).await;
    let state = cachelens::web::AppState::new(pool, cachelens::web::Config::default());
    let api = get_json(&state, "/api/v1/autotune?machine=h100-a").await;
    let rows: Vec<&Value> = arr(&api).iter().filter(|r| r["source"] == "triton").collect();
    assert!(!rows.is_empty());
    let (st, html) = get(&state, "/autotune?machine=h100-a").await;
    assert_eq!(st, 200);
    let cells: Vec<&str> =
        html.split(r#"<td class="mono kwargs winner""#).skip(1).map(|c| c.split("</td>").next().unwrap()).collect();
    assert_eq!(cells.len(), rows.len());
    for (r, cell) in rows.iter().zip(&cells) {
        let raw: Value = serde_json::from_str(r["winner"].as_str().unwrap()).unwrap();
        let shown = cell.split_once('>').unwrap().1;
        let mut want: Vec<String> =
            raw["kwargs"].as_object().unwrap().iter().map(|(k, v)| format!("{k}={v}")).collect();
        want.push(format!("{} warps", raw["num_warps"]));
        want.push(format!("{} stages", raw["num_stages"]));
        for w in &want {
            assert!(shown.contains(w.as_str()), "{w} in {shown}");
        }
        assert!(!shown.contains('{') && !shown.contains("kwargs"), "no raw JSON shown: {shown}");
        assert!(cell.contains("title=\"{&#34;") || cell.contains("title=\"{&quot;"), "raw config in the title: {cell}");
    }
    drop(keep);
}
