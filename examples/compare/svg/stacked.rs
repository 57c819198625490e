//! One panel per curve over a shared x axis.

use std::fmt::Write as _;

use super::plot::{axis_label_y, begin_sized, escape, Plot};
use super::{Series, BOTTOM, TOP};

/// One panel per curve, stacked over a shared x axis: for curves that would hide each other.
#[derive(Debug)]
pub(crate) struct StackedChart {
    /// The heading.
    pub(crate) title: String,
    /// The x axis' label (under the last panel).
    pub(crate) x_label: String,
    /// The y axis' label (beside all panels).
    pub(crate) y_label: String,
    /// The x range shown.
    pub(crate) x_range: (f64, f64),
    /// The y range of every panel.
    pub(crate) y_range: (f64, f64),
    /// The y values marked on every panel's axis.
    pub(crate) y_ticks: Vec<f64>,
    /// One panel each, named inside it.
    pub(crate) panels: Vec<Series>,
    /// A horizontal reference line drawn in every panel.
    pub(crate) rule: f64,
}

const PANEL: f64 = 78.0;
const PANEL_GAP: f64 = 10.0;

impl StackedChart {
    /// The chart as an SVG document.
    pub(crate) fn render(&self) -> String {
        let height = TOP + (PANEL + PANEL_GAP) * self.panels.len() as f64 + BOTTOM;
        let mut svg = begin_sized(&self.title, height);
        let mut last = None;
        for (i, series) in self.panels.iter().enumerate() {
            let top = TOP + (PANEL + PANEL_GAP) * i as f64;
            let plot = Plot::within(top, top + PANEL, self.x_range, self.y_range);
            plot.frame(&mut svg);
            plot.y_tick_marks(&mut svg, self.y_ticks.clone());
            let py = plot.y(self.rule);
            let _ = writeln!(
                svg,
                r##"<line x1="{:.1}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#888" stroke-dasharray="2 3"/>"##,
                plot.left, plot.right
            );
            plot.curve(&mut svg, series, &format!("panel{i}"));
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="13" fill="{}">{}</text>"#,
                plot.right + 12.0,
                top + PANEL / 2.0 + 4.0,
                series.colour,
                escape(&series.name)
            );
            last = Some(plot);
        }
        if let Some(plot) = last {
            plot.x_ticks(&mut svg, &self.x_label);
            let whole = Plot::within(TOP, plot.bottom, self.x_range, self.y_range);
            axis_label_y(&mut svg, &whole, &self.y_label);
        }
        svg.push_str("</svg>\n");
        svg
    }
}
