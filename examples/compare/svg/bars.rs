//! Grouped bars on a logarithmic axis.

use std::fmt::Write as _;

use super::plot::{axis_label_y, begin, escape, legend, Plot};

/// Grouped bars over categories, on a logarithmic y axis (shares that differ by orders of
/// magnitude), each bar labelled with its value; a zero is written, not drawn.
#[derive(Debug)]
pub(crate) struct BarChart {
    /// The heading.
    pub(crate) title: String,
    /// The y axis' label.
    pub(crate) y_label: String,
    /// One group of bars per category (x axis).
    pub(crate) categories: Vec<String>,
    /// One bar per category for each measure: `(legend name, colour, value per category)`.
    pub(crate) measures: Vec<(String, &'static str, Vec<f64>)>,
    /// Writes a bar's value.
    pub(crate) format: fn(f64) -> String,
}

impl BarChart {
    /// The chart as an SVG document.
    pub(crate) fn render(&self) -> String {
        let positive = self
            .measures
            .iter()
            .flat_map(|m| m.2.iter().copied())
            .filter(|v| *v > 0.0);
        let (low, high) = positive.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (low_exp, high_exp) = if high > 0.0 {
            (
                low.log10().floor() as i32,
                (high.log10().ceil() as i32).max(low.log10().floor() as i32 + 1),
            )
        } else {
            (0, 1)
        };
        let plot = Plot::new(
            (0.0, self.categories.len() as f64),
            (low_exp as f64, high_exp as f64),
        );
        let mut svg = begin(&self.title);
        plot.frame(&mut svg);
        for exp in low_exp..=high_exp {
            let py = plot.y(exp as f64);
            let _ = writeln!(
                svg,
                r##"<line x1="{:.1}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e4e4e4"/>"##,
                plot.left, plot.right
            );
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
                plot.left - 6.0,
                py + 4.0,
                escape(&(self.format)(10f64.powi(exp)))
            );
        }
        axis_label_y(&mut svg, &plot, &self.y_label);
        let group = (plot.right - plot.left) / self.categories.len() as f64;
        let bar = group * 0.8 / self.measures.len().max(1) as f64;
        for (c, category) in self.categories.iter().enumerate() {
            let gx = plot.left + group * c as f64 + group * 0.1;
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
                gx + group * 0.4,
                plot.bottom + 20.0,
                escape(category)
            );
            for (m, (_, colour, values)) in self.measures.iter().enumerate() {
                let value = values[c];
                let x = gx + bar * m as f64;
                let top = if value > 0.0 {
                    let py = plot.y(value.log10().max(low_exp as f64));
                    let _ = writeln!(
                        svg,
                        r#"<rect x="{x:.1}" y="{py:.1}" width="{:.1}" height="{:.1}" fill="{colour}"/>"#,
                        bar - 2.0,
                        plot.bottom - py
                    );
                    py
                } else {
                    plot.bottom
                };
                let _ = writeln!(
                    svg,
                    r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"#,
                    x + bar / 2.0 - 1.0,
                    top - 4.0,
                    escape(&(self.format)(value))
                );
            }
        }
        legend(
            &mut svg,
            self.measures.iter().map(|m| (m.0.as_str(), m.1, "", 8.0)),
        );
        svg.push_str("</svg>\n");
        svg
    }
}
