//! Snapshots (insta) of page blocks whose every figure is fixed by the corpus: the overview's
//! size by artifact type, a machine's Triton versions, the invalidations of the a100 upgrade
//! grouped by cause. Times, ages and temp paths are redacted. Review a change with
//! `cargo insta review` (or `INSTA_UPDATE=always`, then `git diff`).

use super::{ok, ok_hx};
use crate::common::*;

/// The text from `start` up to and including the next `end` after it.
fn block<'a>(page: &'a str, start: &str, end: &str) -> &'a str {
    let i = page.find(start).unwrap_or_else(|| panic!("no {start:?} in {page}"));
    let j = page[i..].find(end).unwrap_or_else(|| panic!("no {end:?} after {start:?}")) + i + end.len();
    &page[i..j]
}

/// `YYYY-MM-DD HH:MM` → `[time]`, temp dirs → `[tmp]`.
fn redact(s: &str) -> String {
    let b = s.as_bytes();
    let shape = b"dddd-dd-dd dd:dd";
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let is_time = b.len() - i >= shape.len()
            && shape.iter().zip(&b[i..]).all(|(p, c)| if *p == b'd' { c.is_ascii_digit() } else { p == c });
        if is_time {
            out.push_str("[time]");
            i += shape.len();
        } else {
            let c = s[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    let tmp = std::env::temp_dir().display().to_string();
    out.replace(&tmp, "[tmp]")
}

#[tokio::test]
async fn stable_blocks_of_the_fleet() {
    let (_keep, s) = fleet().await;
    let o = ok(&s, "/").await;
    insta::assert_snapshot!("overview_artifact_types", redact(block(&o, "<h2>Size by artifact type</h2>", "</table>")));
    let m = ok(&s, "/machines/a100-1").await;
    insta::assert_snapshot!("machine_a100_versions", redact(block(&m, "<h2>Triton versions present</h2>", "</table>")));
    let inv = ok_hx(&s, "/invalidations?machine=a100-1&cause=compiler&page=3").await;
    insta::assert_snapshot!(
        "invalidations_a100_compiler_page3",
        redact(block(&inv, "<section class=\"cause-group\"", "</section>"))
    );
}
