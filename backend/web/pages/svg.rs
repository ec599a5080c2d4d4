//! A tiny server-side SVG chart helper: line charts over real time (scans) and bar charts (entries
//! compiled per day, zero days included). No JavaScript; the markup is built from numbers and
//! escaped labels only.

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

/// Approximate width of one label character at the chart's 10px font.
const CHAR_W: f64 = 6.0;

/// Left edge and width of the plot area.
const X0: f64 = PAD_L;
const PLOT_W: f64 = W - PAD_L - PAD_R;

/// The frame: title, axes, the y axis' top and zero, and x tick labels at `(x, label)`.
fn frame(title: &str, max_label: &str, ticks: &[(f64, String)]) -> String {
    let mut s = format!(
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
        t = esc(title)
    );
    let (x0, y0, x1, y1) = (PAD_L, PAD_T, W - PAD_R, H - PAD_B);
    let _ = write!(
        s,
        r#"<text x="{PAD_L}" y="14" class="ct">{t}</text><line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" class="axis"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" class="axis"/><text x="{lx}" y="{ly}" class="lbl" text-anchor="end">{m}</text><text x="{lx}" y="{y1}" class="lbl" text-anchor="end">0</text>"#,
        t = esc(title),
        lx = PAD_L - 4.0,
        ly = PAD_T + 4.0,
        m = esc(max_label),
    );
    for (x, label) in ticks {
        // the outermost labels end at the plot's edges instead of running past them
        let half = label.chars().count() as f64 * CHAR_W / 2.0;
        let anchor = if x - half < x0 {
            "start"
        } else if x + half > x1 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            s,
            r#"<line x1="{x:.1}" y1="{y1}" x2="{x:.1}" y2="{t}" class="axis"/><text x="{x:.1}" y="{by}" class="lbl x" text-anchor="{anchor}">{l}</text>"#,
            t = y1 + 3.0,
            by = H - 8.0,
            l = esc(label),
        );
    }
    s
}

/// How many labels of `chars` characters fit side by side under the plot.
fn labels_that_fit(chars: usize) -> usize {
    ((PLOT_W / (chars as f64 * CHAR_W + 16.0)) as usize).max(2)
}

/// An x-axis label for unix ms `t` as precise as the chart's time span needs: scans a few
/// seconds apart get seconds, a month of scans gets dates (UTC).
fn tick_label(t: i64, span_ms: i64) -> String {
    let f = match span_ms {
        ..120_000 => "%H:%M:%S",
        120_000..172_800_000 => "%m-%d %H:%M",
        _ => "%Y-%m-%d",
    };
    chrono::DateTime::from_timestamp_millis(t).map(|d| d.format(f).to_string()).unwrap_or_default()
}

/// A line chart over time: `(unix ms, value)` points, x spaced by real time (a week without
/// scans shows as a week). `time` names a point's time (tooltips), `fmt` its value.
pub fn line_chart(
    title: &str,
    points: &[(i64, f64)],
    time: impl Fn(i64) -> String,
    fmt: impl Fn(f64) -> String,
) -> String {
    if points.is_empty() {
        return String::new();
    }
    let max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let t0 = points.iter().map(|p| p.0).min().unwrap_or(0);
    let t1 = points.iter().map(|p| p.0).max().unwrap_or(0);
    let span = (t1 - t0) as f64;
    let x_of = |t: i64| if span <= 0.0 { X0 + PLOT_W / 2.0 } else { X0 + PLOT_W * (t - t0) as f64 / span };
    let ticks: Vec<(f64, String)> = if span <= 0.0 {
        vec![(x_of(t0), time(t0))]
    } else {
        let k = labels_that_fit(tick_label(t0, t1 - t0).chars().count());
        let ticks: Vec<(f64, String)> = (0..k)
            .map(|i| t0 + ((t1 - t0) as f64 * i as f64 / (k - 1) as f64) as i64)
            .map(|t| (x_of(t), tick_label(t, t1 - t0)))
            .collect();
        // a span shorter than the labels' precision repeats labels: name only the two ends
        if ticks.windows(2).any(|w| w[0].1 == w[1].1) {
            let (a, b) = (tick_label(t0, t1 - t0), tick_label(t1, t1 - t0));
            if a == b { vec![(x_of(t0), a)] } else { vec![(x_of(t0), a), (x_of(t1), b)] }
        } else {
            ticks
        }
    };
    let mut s = frame(title, &fmt(max), &ticks);
    let y_of = |v: f64| H - PAD_B - (H - PAD_T - PAD_B) * v / max;
    let path: Vec<String> = points.iter().map(|p| format!("{:.1},{:.1}", x_of(p.0), y_of(p.1))).collect();
    let _ = write!(s, r#"<polyline class="line" points="{}"/>"#, path.join(" "));
    for p in points {
        let _ = write!(
            s,
            r#"<circle class="dot" cx="{:.1}" cy="{:.1}" r="3"><title>{}: {}</title></circle>"#,
            x_of(p.0),
            y_of(p.1),
            esc(&time(p.0)),
            esc(&fmt(p.1))
        );
    }
    s.push_str("</svg>");
    s
}

/// A bar chart of `(label, value)` bars in order, every bar drawn (zeros as gaps); x labels on
/// as many bars as fit, evenly spaced.
pub fn bar_chart(title: &str, bars: &[(String, f64)], fmt: impl Fn(f64) -> String) -> String {
    if bars.is_empty() {
        return String::new();
    }
    let max = bars.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let n = bars.len();
    let slot = PLOT_W / n as f64;
    let fit = labels_that_fit(bars.iter().map(|b| b.0.chars().count()).max().unwrap_or(1));
    let every = n.div_ceil(fit).max(1);
    let ticks: Vec<(f64, String)> = bars
        .iter()
        .enumerate()
        // counted from the last bar: the most recent one is always labelled
        .filter(|(i, _)| (n - 1 - i).is_multiple_of(every))
        .map(|(i, b)| (X0 + slot * (i as f64 + 0.5), b.0.clone()))
        .collect();
    let mut s = frame(title, &fmt(max), &ticks);
    let bw = (slot * 0.8).clamp(1.0, 48.0);
    for (i, b) in bars.iter().enumerate() {
        let h = (H - PAD_T - PAD_B) * b.1 / max;
        let _ = write!(
            s,
            r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{bw:.1}" height="{h:.1}"><title>{}: {}</title></rect>"#,
            X0 + slot * i as f64 + (slot - bw) / 2.0,
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
    fn xs(svg: &str, tag: &str, attr: &str) -> Vec<f64> {
        svg.split(&format!("<{tag} "))
            .skip(1)
            .map(|x| {
                let a = &x[x.find(&format!("{attr}=\"")).unwrap() + attr.len() + 2..];
                a[..a.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    #[test]
    fn charts_escape_labels_and_handle_one_point() {
        let s = super::line_chart("t<", &[(0, 3.0)], |_| "<a>".into(), |v| format!("{v}"));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("&lt;a&gt;") && !s.contains("<a>"));
        assert!(super::bar_chart("b", &[], |v| format!("{v}")).is_empty());
    }

    #[test]
    fn line_chart_spaces_points_by_time() {
        // three scans: two an hour apart, the third nine hours later
        let h = 3_600_000;
        let s =
            super::line_chart("t", &[(0, 1.0), (h, 2.0), (10 * h, 3.0)], |t| format!("h{}", t / h), |v| format!("{v}"));
        let cx = xs(&s, "circle", "cx");
        assert_eq!(cx.len(), 3);
        let (a, b) = (cx[1] - cx[0], cx[2] - cx[1]);
        assert!((b / a - 9.0).abs() < 0.05, "gaps proportional to time: {cx:?}");
        assert!(s.contains(">h0: 1</title>") && s.contains(">h10: 3</title>"), "points name their time");
        assert!(s.contains(">01-01 00:00<") && s.contains(">01-01 10:00<"), "first and last time on the axis");
        assert!(s.matches("class=\"lbl x\"").count() > 2, "more than first/last when they fit");
    }

    #[test]
    fn bar_chart_draws_every_bar_and_labels_what_fits() {
        let bars: Vec<(String, f64)> = (0..30).map(|i| (format!("2026-01-{:02}", i + 1), (i % 3) as f64)).collect();
        let s = super::bar_chart("b", &bars, |v| format!("{v}"));
        assert_eq!(s.matches("<rect ").count(), 30, "zero bars are drawn too (height 0)");
        let labels = s.matches("class=\"lbl x\"").count();
        assert!((3..30).contains(&labels), "{labels} x labels");
        assert!(s.contains(">2026-01-30<"), "the most recent day is labelled");
    }
}
