"""Line and bar charts as plain SVG, with no plotting library: what `benches/report.py` draws with."""

import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 720, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 210, 40, 55
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"]


def nice_step(span, ticks=5):
    """A round step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over `span`."""
    raw = span / ticks if span > 0 else 1
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def fmt(value):
    if value >= 1e6 and value % 1e6 == 0:
        return f"{value / 1e6:g}M"
    if value >= 1e3 and value % 1e3 == 0:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def line_chart(title, x_label, y_label, series, log_x=False):
    """An SVG document: `series` is a list of (label, [(x, y), ...], dashed, color index) drawn as
    lines with markers; the x axis is logarithmic when `log_x`, the y axis starts at zero."""
    xs = sorted({x for _, points, _, _ in series for x, _ in points})
    ys = [y for _, points, _, _ in series for _, y in points]
    if not xs or not ys:
        raise ValueError(f"nothing to draw for {title!r}")
    y_step = nice_step(max(ys))
    y_max = y_step * math.ceil(max(ys) * 1.05 / y_step)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def tx(x):
        lo, hi = (math.log10(xs[0]), math.log10(xs[-1])) if log_x else (xs[0], xs[-1])
        value = math.log10(x) if log_x else x
        return LEFT + (plot_w * (value - lo) / (hi - lo) if hi > lo else plot_w / 2)

    def ty(y):
        return TOP + plot_h * (1 - y / y_max)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    y = 0.0
    while y <= y_max + 1e-9:
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{ty(y):.1f}" y2="{ty(y):.1f}" stroke="#e5e5e5"/>'
        )
        out.append(f'<text x="{LEFT - 6}" y="{ty(y) + 4:.1f}" text-anchor="end">{fmt(round(y, 6))}</text>')
        y += y_step
    for x in xs:
        out.append(
            f'<line x1="{tx(x):.1f}" x2="{tx(x):.1f}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#f0f0f0"/>'
        )
        out.append(f'<text x="{tx(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{fmt(x)}</text>')
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>'
    )
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 12}" text-anchor="middle">{escape(x_label)}</text>'
    )
    out.append(
        f'<text transform="translate(16 {TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">'
        f"{escape(y_label)}</text>"
    )
    for index, (label, points, dashed, color_index) in enumerate(series):
        color = COLORS[color_index % len(COLORS)]
        path = " ".join(f"{tx(x):.1f},{ty(y):.1f}" for x, y in sorted(points))
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for x, y in points:
            out.append(f'<circle cx="{tx(x):.1f}" cy="{ty(y):.1f}" r="3" fill="{color}"/>')
        legend_y = TOP + 8 + 18 * index
        legend_x = LEFT + plot_w + 12
        out.append(
            f'<line x1="{legend_x}" x2="{legend_x + 22}" y1="{legend_y}" y2="{legend_y}" '
            f'stroke="{color}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{legend_x + 28}" y="{legend_y + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def bar_chart(title, x_label, categories, series):
    """An SVG document of horizontal bars: one group per category (top to bottom), one bar per
    series in each group; `series` is a list of (label, [value or None per category]). The x axis
    starts at zero."""
    values = [value for _, column in series for value in column if value is not None]
    if not categories or not values:
        raise ValueError(f"nothing to draw for {title!r}")
    label_w, legend_h, bar_h, gap = 190, 24, 9, 7
    group_h = bar_h * len(series) + gap
    plot_w = WIDTH - label_w - 30
    height = TOP + legend_h + group_h * len(categories) + BOTTOM
    step = nice_step(max(values))
    x_max = step * math.ceil(max(values) * 1.05 / step)

    def tx(x):
        return label_w + plot_w * x / x_max

    top = TOP + legend_h
    bottom = top + group_h * len(categories)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="10" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for index, (label, _) in enumerate(series):
        x = label_w + 140 * index
        out.append(f'<rect x="{x}" y="{TOP - 2}" width="14" height="10" fill="{COLORS[index % len(COLORS)]}"/>')
        out.append(f'<text x="{x + 20}" y="{TOP + 7}">{escape(label)}</text>')
    x = 0.0
    while x <= x_max + 1e-9:
        out.append(f'<line x1="{tx(x):.1f}" x2="{tx(x):.1f}" y1="{top}" y2="{bottom}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{tx(x):.1f}" y="{bottom + 16}" text-anchor="middle">{fmt(round(x, 6))}</text>')
        x += step
    for row, category in enumerate(categories):
        y = top + group_h * row
        out.append(
            f'<text x="{label_w - 6}" y="{y + group_h / 2 + 1:.1f}" text-anchor="end">{escape(category)}</text>'
        )
        for index, (_, column) in enumerate(series):
            value = column[row]
            if value is None:
                continue
            color = COLORS[index % len(COLORS)]
            out.append(
                f'<rect x="{label_w}" y="{y + gap / 2 + bar_h * index:.1f}" width="{tx(value) - label_w:.1f}" '
                f'height="{bar_h - 1}" fill="{color}"/>'
            )
    out.append(f'<line x1="{label_w}" x2="{label_w}" y1="{top}" y2="{bottom}" stroke="#333"/>')
    out.append(f'<text x="{label_w + plot_w / 2}" y="{bottom + 36}" text-anchor="middle">{escape(x_label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
