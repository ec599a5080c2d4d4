//! The "what misses cost" block of the overview and machine pages (`templates/headline.html`):
//! [`crate::db::headline`]'s figures formatted, a per-day trend as inline SVG, and what the
//! figures count. `/api/v1/headline` answers the same figures as JSON.

use crate::db::headline::{self, Figures, Headline};
use crate::fmt;

/// One window's figures as text (`–` where unknown).
pub struct FigView {
    pub hits: i64,
    pub misses: i64,
    pub hit_rate: String,
    pub miss_time: String,
    pub saved_time: String,
    /// "3 of 5 hits" when some hits' compile time is unknown, else empty.
    pub saved_note: String,
}

/// One machine's line of the fleet table.
pub struct LineView {
    pub name: String,
    pub href: String,
    pub week: FigView,
    pub all: FigView,
}

/// One bar of the trend (SVG units).
pub struct TrendBar {
    pub x: i64,
    pub hit_y: String,
    pub hit_h: String,
    pub miss_y: String,
    pub miss_h: String,
    pub title: String,
}

pub struct HeadlineView {
    /// `fleet` or the machine's name (the block's `data-scope`).
    pub scope: String,
    /// The fleet's headline (not one machine's).
    pub fleet: bool,
    pub hook: bool,
    /// (`day`|`week`|`all`, label, figures)
    pub windows: Vec<(&'static str, &'static str, FigView)>,
    pub last_hook: String,
    pub trend: Vec<TrendBar>,
    pub trend_from: String,
    pub trend_to: String,
    pub with_hook: Vec<LineView>,
    /// Machines the hook never reported from (not a 0% hit rate: unknown).
    pub without_hook: Vec<(String, String)>,
    /// Machines (or this machine) whose caches hold Inductor/vLLM artifacts.
    pub artifacts: Vec<String>,
    pub api_url: String,
}

fn pct(r: Option<f64>) -> String {
    r.map(|r| format!("{:.1}%", r * 100.0)).unwrap_or_else(|| "–".into())
}

fn fig(f: &Figures) -> FigView {
    let ms = |v: Option<f64>| v.map(fmt::duration_ms).unwrap_or_else(|| "–".into());
    FigView {
        hits: f.hits,
        misses: f.misses,
        hit_rate: pct(f.hit_rate),
        miss_time: ms(f.miss_ms),
        saved_time: ms(f.saved_ms),
        saved_note: if f.saved_hits < f.hits {
            format!("{} of {} hits timed", f.saved_hits, f.hits)
        } else {
            String::new()
        },
    }
}

/// Width of one trend bar and the chart's height (SVG units).
const BAR: i64 = 12;
const HEIGHT: i64 = 40;

/// The view of a headline; `artifacts`: the machines whose caches hold Inductor/vLLM artifacts.
pub fn view(h: &Headline, artifacts: Vec<String>) -> HeadlineView {
    let top = h.trend.iter().map(|d| d.hits + d.misses).max().unwrap_or(0).max(1) as f64;
    let trend = h
        .trend
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let hh = d.hits as f64 / top * HEIGHT as f64;
            let mh = d.misses as f64 / top * HEIGHT as f64;
            TrendBar {
                x: i as i64 * (BAR + 2),
                hit_y: format!("{:.1}", HEIGHT as f64 - hh),
                hit_h: format!("{hh:.1}"),
                miss_y: format!("{:.1}", HEIGHT as f64 - hh - mh),
                miss_h: format!("{mh:.1}"),
                title: format!(
                    "{}: {} hits, {} misses, hit rate {}",
                    fmt::day(d.t / 86_400_000),
                    d.hits,
                    d.misses,
                    pct(d.hit_rate)
                ),
            }
        })
        .collect();
    let day = |t: Option<i64>| t.map(|t| fmt::day(t / 86_400_000)).unwrap_or_default();
    let link = |n: &str| format!("/machines/{}", fmt::enc(n));
    HeadlineView {
        scope: h.machine.clone().unwrap_or_else(|| "fleet".into()),
        fleet: h.machine.is_none(),
        hook: h.hook(),
        windows: vec![
            ("day", "last 24 hours", fig(&h.day)),
            ("week", "last 7 days", fig(&h.week)),
            ("all", "all time", fig(&h.all)),
        ],
        last_hook: h.last_hook_hour.map(|t| fmt::time(Some(t))).unwrap_or_default(),
        trend_from: day(h.trend.first().map(|d| d.t)),
        trend_to: day(h.trend.last().map(|d| d.t)),
        trend,
        with_hook: h
            .machines
            .iter()
            .filter(|m| m.hook)
            .map(|m| LineView { href: link(&m.name), name: m.name.clone(), week: fig(&m.week), all: fig(&m.all) })
            .collect(),
        without_hook: h.machines.iter().filter(|m| !m.hook).map(|m| (m.name.clone(), link(&m.name))).collect(),
        artifacts,
        api_url: match &h.machine {
            Some(m) => format!("/api/v1/headline?machine={}", fmt::enc(m)),
            None => "/api/v1/headline".into(),
        },
    }
}

/// The headline of `machine` (or the fleet) now, with the Inductor/vLLM note.
pub async fn load(pool: &crate::db::Store, machine: Option<&str>) -> sqlx::Result<Option<HeadlineView>> {
    let Some(h) = headline::headline(pool, machine, crate::db::now_ms()).await? else {
        return Ok(None);
    };
    let artifacts = headline::with_compiled_artifacts(pool, machine).await?;
    Ok(Some(view(&h, artifacts)))
}
