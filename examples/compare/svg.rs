//! A small SVG writer for the comparison's pictures: step charts, stacked panels and grouped
//! bar charts, with axes, ticks, labels and a legend. Hand-written so that the example needs no
//! plotting crate.

mod bars;
mod line;
mod plot;
mod stacked;

pub(crate) use bars::BarChart;
pub(crate) use line::LineChart;
pub(crate) use stacked::StackedChart;

const WIDTH: f64 = 1040.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 300.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 64.0;

/// The colour of each algorithm, in [`NAMES`](crate::lineup::NAMES) order, and one more for
/// the shaper's departures.
pub(crate) const COLOURS: [&str; 6] = ["#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#111111", "#b15928"];

/// One named curve, drawn as steps (a count that jumps): each point's value holds until the
/// next point, the last one to the plot's right edge.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    /// The legend's text.
    pub(crate) name: String,
    /// `(x, y)` points, in increasing `x`.
    pub(crate) points: Vec<(f64, f64)>,
    /// Stroke colour.
    pub(crate) colour: &'static str,
    /// An SVG `stroke-dasharray`, or empty for a solid line.
    pub(crate) dash: &'static str,
    /// Stroke width in pixels.
    pub(crate) width: f64,
}
