//! A tiny server-side SVG chart helper: line charts (scans over time) and bar charts (entries
//! compiled per day). No JavaScript; the markup is built from numbers and escaped labels only.

use std::fmt::Write;

const W: f64 = 560.0;
const H: f64 = 180.0;
const PAD_L: f64 = 56.0;
const PAD_R: f64 = 12.0;
const PAD_T: f64 = 22.0;
const PAD_B: f64 = 28.0;

/// Escape text for SVG/XML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn frame(title: &str, max_label: &str, first: &str, last: &str) -> String {
    let mut s = format!(
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
        t = esc(title)
    );
    let (x0, y0, x1, y1) = (PAD_L, PAD_T, W - PAD_R, H - PAD_B);
    let _ = write!(
        s,
        r#"<text x="{PAD_L}" y="14" class="ct">{t}</text><line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" class="axis"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" class="axis"/><text x="{lx}" y="{ly}" class="lbl" text-anchor="end">{m}</text><text x="{lx}" y="{y1}" class="lbl" text-anchor="end">0</text><text x="{x0}" y="{by}" class="lbl">{f}</text><text x="{x1}" y="{by}" class="lbl" text-anchor="end">{l}</text>"#,
        t = esc(title),
        lx = PAD_L - 4.0,
        ly = PAD_T + 4.0,
        m = esc(max_label),
        by = H - 8.0,
        f = esc(first),
        l = esc(last),
    );
    s
}

/// A line chart of `(label, value)` points in order; `fmt` prints the top of the y axis.
pub fn line_chart(title: &str, points: &[(String, f64)], fmt: impl Fn(f64) -> String) -> String {
    if points.is_empty() {
        return String::new();
    }
    let max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let n = points.len();
    let mut s = frame(title, &fmt(max), &points[0].0, &points[n - 1].0);
    let xy = |i: usize, v: f64| {
        let x =
            if n == 1 { (PAD_L + W - PAD_R) / 2.0 } else { PAD_L + (W - PAD_L - PAD_R) * i as f64 / (n - 1) as f64 };
        (x, H - PAD_B - (H - PAD_T - PAD_B) * v / max)
    };
    let path: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (x, y) = xy(i, p.1);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = write!(s, r#"<polyline class="line" points="{}"/>"#, path.join(" "));
    for (i, p) in points.iter().enumerate() {
        let (x, y) = xy(i, p.1);
        let _ = write!(
            s,
            r#"<circle class="dot" cx="{x:.1}" cy="{y:.1}" r="3"><title>{}: {}</title></circle>"#,
            esc(&p.0),
            esc(&fmt(p.1))
        );
    }
    s.push_str("</svg>");
    s
}

/// A bar chart of `(label, value)` bars in order.
pub fn bar_chart(title: &str, bars: &[(String, f64)], fmt: impl Fn(f64) -> String) -> String {
    if bars.is_empty() {
        return String::new();
    }
    let max = bars.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let n = bars.len();
    let mut s = frame(title, &fmt(max), &bars[0].0, &bars[n - 1].0);
    let slot = (W - PAD_L - PAD_R) / n as f64;
    let bw = (slot * 0.8).clamp(1.0, 48.0);
    for (i, b) in bars.iter().enumerate() {
        let h = (H - PAD_T - PAD_B) * b.1 / max;
        let _ = write!(
            s,
            r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{bw:.1}" height="{h:.1}"><title>{}: {}</title></rect>"#,
            PAD_L + slot * i as f64 + (slot - bw) / 2.0,
            H - PAD_B - h,
            esc(&b.0),
            esc(&fmt(b.1))
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn charts_escape_labels_and_handle_one_point() {
        let s = super::line_chart("t<", &[("<a>".into(), 3.0)], |v| format!("{v}"));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("&lt;a&gt;") && !s.contains("<a>"));
        assert!(super::bar_chart("b", &[], |v| format!("{v}")).is_empty());
    }
}
