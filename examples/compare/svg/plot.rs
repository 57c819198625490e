//! The drawing primitives every chart shares: the plot area and its axes, curves, the legend,
//! tick values and text escaping.

use std::fmt::Write as _;

use super::{Series, BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH};

/// The plotting area and the mapping from data to pixels.
pub(super) struct Plot {
    pub(super) left: f64,
    pub(super) right: f64,
    pub(super) top: f64,
    pub(super) bottom: f64,
    x_range: (f64, f64),
    y_range: (f64, f64),
}

impl Plot {
    pub(super) fn new(x_range: (f64, f64), y_range: (f64, f64)) -> Plot {
        Plot::within(TOP, HEIGHT - BOTTOM, x_range, y_range)
    }

    /// A plot between heights `top` and `bottom` of the picture, full width.
    pub(super) fn within(top: f64, bottom: f64, x_range: (f64, f64), y_range: (f64, f64)) -> Plot {
        Plot {
            left: LEFT,
            right: WIDTH - RIGHT,
            top,
            bottom,
            x_range,
            y_range,
        }
    }

    pub(super) fn x(&self, x: f64) -> f64 {
        self.left + (x - self.x_range.0) / (self.x_range.1 - self.x_range.0) * (self.right - self.left)
    }

    pub(super) fn y(&self, y: f64) -> f64 {
        self.bottom - (y - self.y_range.0) / (self.y_range.1 - self.y_range.0) * (self.bottom - self.top)
    }

    pub(super) fn frame(&self, svg: &mut String) {
        let _ = writeln!(
            svg,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#333"/>"##,
            self.left,
            self.top,
            self.right - self.left,
            self.bottom - self.top
        );
    }

    pub(super) fn x_ticks(&self, svg: &mut String, label: &str) {
        for x in ticks(self.x_range) {
            let px = self.x(x);
            let _ = writeln!(
                svg,
                r##"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="#e4e4e4"/>"##,
                self.top, self.bottom
            );
            let _ = writeln!(
                svg,
                r#"<text x="{px:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
                self.bottom + 18.0,
                number(x)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="14" text-anchor="middle">{}</text>"#,
            (self.left + self.right) / 2.0,
            self.bottom + 44.0,
            escape(label)
        );
    }

    pub(super) fn y_ticks(&self, svg: &mut String, label: &str) {
        self.y_tick_marks(svg, ticks(self.y_range));
        axis_label_y(svg, self, label);
    }

    pub(super) fn y_tick_marks(&self, svg: &mut String, values: Vec<f64>) {
        for y in values {
            let py = self.y(y);
            let _ = writeln!(
                svg,
                r##"<line x1="{:.1}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e4e4e4"/>"##,
                self.left, self.right
            );
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
                self.left - 6.0,
                py + 4.0,
                number(y)
            );
        }
    }
}

pub(super) fn axis_label_y(svg: &mut String, plot: &Plot, label: &str) {
    let (x, y) = (22.0, (plot.top + plot.bottom) / 2.0);
    let _ = writeln!(
        svg,
        r#"<text x="{x}" y="{y:.1}" font-size="14" text-anchor="middle" transform="rotate(-90 {x} {y:.1})">{}</text>"#,
        escape(label)
    );
}

pub(super) fn begin(title: &str) -> String {
    begin_sized(title, HEIGHT)
}

pub(super) fn begin_sized(title: &str, height: f64) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="30" font-size="17" font-weight="bold">{}</text>"#,
        escape(title)
    );
    svg
}

pub(super) fn legend<'a>(
    svg: &mut String,
    entries: impl Iterator<Item = (&'a str, &'static str, &'static str, f64)>,
) {
    let x = WIDTH - RIGHT + 16.0;
    for (i, (name, colour, dash, width)) in entries.enumerate() {
        let y = TOP + 14.0 + 22.0 * i as f64;
        let dash = if dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{dash}""#)
        };
        let _ = writeln!(
            svg,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="{}"{dash}/>"#,
            x + 28.0,
            width.max(2.5)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" font-size="13">{}</text>"#,
            x + 36.0,
            y + 4.0,
            escape(name)
        );
    }
}

/// Round tick values covering `range`: steps of 1, 2 or 5 times a power of ten, about 6 of them.
pub(super) fn ticks(range: (f64, f64)) -> Vec<f64> {
    let span = range.1 - range.0;
    if span <= 0.0 || !span.is_finite() {
        return vec![range.0];
    }
    let raw = span / 6.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let first = (range.0 / step).ceil() as i64;
    let last = (range.1 / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// A tick label: no decimals for whole numbers, else up to three.
pub(super) fn number(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{}", value.round() as i64)
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').to_string()
    }
}

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Plot {
    /// Draws `series` clipped to this plot's area (`clip` names the clip path, unique per plot).
    pub(super) fn curve(&self, svg: &mut String, series: &Series, clip: &str) {
        let _ = writeln!(
            svg,
            r#"<clipPath id="{clip}"><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/></clipPath>"#,
            self.left,
            self.top,
            self.right - self.left,
            self.bottom - self.top
        );
        let mut path = String::new();
        for (i, &(x, y)) in series.points.iter().enumerate() {
            let (px, py) = (self.x(x), self.y(y));
            let _ = if i == 0 {
                write!(path, "M{px:.1},{py:.1}")
            } else {
                write!(path, " H{px:.1} V{py:.1}")
            };
        }
        if !series.points.is_empty() {
            let _ = write!(path, " H{:.1}", self.right);
        }
        let dash = if series.dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{}""#, series.dash)
        };
        let _ = writeln!(
            svg,
            r#"<path d="{path}" fill="none" stroke="{}" stroke-width="{}"{dash} clip-path="url(#{clip})"/>"#,
            series.colour, series.width
        );
    }
}
