"""Charts as inline SVG for the HTML report: bars (with an optional reference curve) and lines, drawn from plain
lists so that the page needs no plotting library and no network. Every mark carries a <title>: hovering it
shows the value."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

WIDTH, HEIGHT = 440, 230
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 10, 44  # the plot area's margins: axis labels go there
BAR, REFERENCE = "#4c78a8", "#e45756"
TRAINING, VALIDATION, RATE = BAR, REFERENCE, "#54a24b"  # a run's curves, the same colour in every chart


def number(x: float) -> str:
    """A tick label: 3 significant digits, thousands as k and millions as M."""
    if x == 0:
        return "0"
    if abs(x) < 0.01:  # a learning rate: 3e-4, not 0.0003
        mantissa, exponent = f"{x:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def ticks(low: float, high: float, count: int = 4) -> list[float]:
    """About `count` round tick values from low to high."""
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if step * m >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def frame(xlabel: str, ylabel: str, y_high: float, *, y_low: float = 0.0,
          ytick: Callable[[float], str] = number) -> tuple[list[str], Callable[[float], float]]:
    """The SVG elements of the axes, grid and labels, and y -> pixel for the plot area."""
    h = HEIGHT - TOP - BOTTOM
    low, high = y_low, y_high if y_high > y_low else y_low + 1

    def y_of(v: float) -> float:
        return TOP + h - (v - low) / (high - low) * h

    parts = [f'<text class="axis" x="{LEFT - 40}" y="{TOP + h / 2}" transform="rotate(-90 {LEFT - 40} '
             f'{TOP + h / 2})" text-anchor="middle">{escape(ylabel)}</text>',
             f'<text class="axis" x="{LEFT + (WIDTH - LEFT - RIGHT) / 2}" y="{HEIGHT - 6}" '
             f'text-anchor="middle">{escape(xlabel)}</text>']
    for v in ticks(low, high):
        y = y_of(v)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text class="tick" x="{LEFT - 4}" y="{y + 3:.1f}" text-anchor="end">{ytick(v)}</text>')
    parts.append(f'<line class="axisline" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + h}" y2="{TOP + h}"/>')
    return parts, y_of


def svg(title: str, parts: list[str], legend: list[tuple[str, str]] = (), height: int = HEIGHT) -> str:
    """The chart as one <figure>: the title as caption, a legend of (colour, name) above the plot."""
    keys = "".join(f'<span class="key"><i style="background:{c}"></i>{escape(n)}</span>' for c, n in legend)
    return (f'<figure class="chart"><figcaption>{escape(title)}{keys and f"<span class=legend>{keys}</span>"}'
            f'</figcaption><svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
            f'aria-label="{escape(title)}">{"".join(parts)}</svg></figure>')


def bars(title: str, labels: list[str], values: list[float], *, xlabel: str, ylabel: str,
         reference: list[float] | None = None, names: tuple[str, str] = ("observed", "reference"),
         percent: bool = False) -> str:
    """A bar per label; `reference` (one value per label) is drawn as a line with dots over the bars."""
    top = max([*values, *(reference or []), 1e-12]) * 1.08
    fmt = (lambda v: f"{v:.0%}" if top >= 0.1 else f"{v:.1%}") if percent else number
    parts, y_of = frame(xlabel, ylabel, top, ytick=fmt)
    n, w = len(values), (WIDTH - LEFT - RIGHT)
    step = w / max(n, 1)
    every = max(1, math.ceil(n / 12))  # at most about 12 x labels
    for i, (label, v) in enumerate(zip(labels, values)):
        x, y = LEFT + i * step, y_of(v)
        parts.append(f'<rect class="bar" x="{x + step * 0.1:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" '
                     f'height="{y_of(0) - y:.1f}" fill="{BAR}"><title>{escape(label)}: {fmt(v)}</title></rect>')
        if i % every == 0:
            parts.append(f'<text class="tick" x="{x + step / 2:.1f}" y="{HEIGHT - BOTTOM + 13}" '
                         f'text-anchor="middle">{escape(label)}</text>')
    legend = []
    if reference is not None:
        if n > 3:  # a curve over lengths; a few categories get a mark each
            points = " ".join(f"{LEFT + (i + 0.5) * step:.1f},{y_of(r):.1f}" for i, r in enumerate(reference))
            parts.append(f'<polyline points="{points}" fill="none" stroke="{REFERENCE}" stroke-width="2"/>')
        else:
            parts += [f'<line x1="{LEFT + i * step + step * 0.05:.1f}" x2="{LEFT + (i + 1) * step - step * 0.05:.1f}" '
                      f'y1="{y_of(r):.1f}" y2="{y_of(r):.1f}" stroke="{REFERENCE}" stroke-width="2.5"/>'
                      for i, r in enumerate(reference)]
        parts += [f'<circle cx="{LEFT + (i + 0.5) * step:.1f}" cy="{y_of(r):.1f}" r="2.5" fill="{REFERENCE}">'
                  f'<title>{escape(labels[i])}: {names[1]} {fmt(r)}</title></circle>' for i, r in enumerate(reference)]
        legend = [(BAR, names[0]), (REFERENCE, names[1])]
    return svg(title, parts, legend)


def hbars(title: str, labels: list[str], values: list[float], *, xlabel: str) -> str:
    """Horizontal bars, one row per label, the largest first as given (most frequent pieces)."""
    row, label_w = 17, 110
    height = TOP + row * len(values) + 30
    top = max([*values, 1]) * 1.05
    w = WIDTH - label_w - RIGHT - 40
    parts = []
    for i, (label, v) in enumerate(zip(labels, values)):
        y = TOP + i * row
        parts.append(f'<text class="tick mono" x="{label_w - 4}" y="{y + 12}" text-anchor="end">{escape(label)}</text>'
                     f'<rect class="bar" x="{label_w}" y="{y + 2}" width="{v / top * w:.1f}" height="{row - 4}" '
                     f'fill="{BAR}"><title>{escape(label)}: {v:,.0f}</title></rect>'
                     f'<text class="tick" x="{label_w + v / top * w + 4:.1f}" y="{y + 12}">{number(v)}</text>')
    parts.append(f'<text class="axis" x="{label_w + w / 2}" y="{height - 8}" text-anchor="middle">'
                 f'{escape(xlabel)}</text>')
    return svg(title, parts, height=height)


def lines(title: str, series: list[tuple[str, str, list[float], list[float]]], *, xlabel: str, ylabel: str) -> str:
    """One polyline per (name, colour, xs, ys) over the range of the values; a series of one point is a dot."""
    xs = [x for _, _, sx, _ in series for x in sx]
    ys = [y for _, _, _, sy in series for y in sy if y is not None]
    if not ys:
        return svg(title, [f'<text class="axis" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
                           'nothing logged yet</text>'])
    pad = (max(ys) - min(ys)) * 0.05 or abs(max(ys)) * 0.05 or 1.0
    parts, y_of = frame(xlabel, ylabel, max(ys) + pad, y_low=min(ys) - pad)
    x0, x1 = min(xs), max(xs)
    span = (x1 - x0) or 1

    def x_of(x: float) -> float:
        return LEFT + (x - x0) / span * (WIDTH - LEFT - RIGHT)

    for tick in ticks(x0, x1):
        parts.append(f'<text class="tick" x="{x_of(tick):.1f}" y="{HEIGHT - BOTTOM + 13}" '
                     f'text-anchor="middle">{number(tick)}</text>')
    legend = []
    for name, colour, sx, sy in series:
        points = [(x, y) for x, y in zip(sx, sy) if y is not None]
        if not points:
            continue
        legend.append((colour, name))
        path = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
        if len(points) <= 40:
            parts += [f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="2.2" fill="{colour}">'
                      f'<title>{escape(name)} at {number(x)}: {y:.4g}</title></circle>' for x, y in points]
    return svg(title, parts, legend)
