//! Step curves over two linear axes, with reference lines and a legend.

use std::fmt::Write as _;

use super::plot::{begin, escape, legend, Plot};
use super::Series;

/// A chart of curves over two linear axes.
#[derive(Debug)]
pub(crate) struct LineChart {
    /// The heading.
    pub(crate) title: String,
    /// The x axis' label.
    pub(crate) x_label: String,
    /// The y axis' label.
    pub(crate) y_label: String,
    /// The x range shown.
    pub(crate) x_range: (f64, f64),
    /// The y range shown.
    pub(crate) y_range: (f64, f64),
    /// The curves.
    pub(crate) series: Vec<Series>,
    /// Horizontal reference lines, each with a label (for example the limit).
    pub(crate) rules: Vec<(f64, String)>,
}

impl LineChart {
    /// The chart as an SVG document.
    pub(crate) fn render(&self) -> String {
        let plot = Plot::new(self.x_range, self.y_range);
        let mut svg = begin(&self.title);
        plot.frame(&mut svg);
        plot.x_ticks(&mut svg, &self.x_label);
        plot.y_ticks(&mut svg, &self.y_label);
        for (y, label) in &self.rules {
            let py = plot.y(*y);
            let _ = writeln!(
                svg,
                r##"<line x1="{:.1}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#888" stroke-dasharray="2 3"/>"##,
                plot.left, plot.right
            );
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#555">{}</text>"##,
                plot.left + 4.0,
                py - 4.0,
                escape(label)
            );
        }
        for series in &self.series {
            plot.curve(&mut svg, series, "plot");
        }
        legend(
            &mut svg,
            self.series
                .iter()
                .map(|s| (s.name.as_str(), s.colour, s.dash, s.width)),
        );
        svg.push_str("</svg>\n");
        svg
    }
}
