"""A project's health over time as a small SVG picture, drawn on the server (no script, no CDN):
the share of fetches answered and the lowest watched-field coverage of its rule sets, per step,
with a band for each alert from its start to its recovery. Pure: figures in, markup out."""

from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 720, 220, 44, 12, 26, 28
LINES = (("fetch_rate", "fetches answered", "#2a7ab0"), ("coverage", "watched fields found", "#2c9c4a"))


@dataclass
class Band:
    start: datetime
    end: datetime | None  # None: still open
    kind: str
    label: str


def chart_svg(steps: list[dict], bands: list[Band], start: datetime, end: datetime) -> str:
    """steps: [{"at": datetime, "fetch_rate": 0..1 | None, "coverage": 0..1 | None}], oldest first."""
    span = max((end - start).total_seconds(), 1.0)

    def x(moment: datetime) -> float:
        seconds = min(max((moment - start).total_seconds(), 0.0), span)
        return round(LEFT + seconds / span * (WIDTH - LEFT - RIGHT), 1)

    def y(share: float) -> float:
        return round(TOP + (1 - share) * (HEIGHT - TOP - BOTTOM), 1)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        'role="img" aria-label="Health over time" class="health-svg">',
        *_grid(y),
        *(_band(b, x, end) for b in bands),
        *(_line(steps, key, color, x, y) for key, _label, color in LINES),
        *_axis(start, end),
        *_legend(),
        "</svg>",
    ]
    return "".join(parts)


def _grid(y) -> list[str]:
    out = []
    for share in (0, 0.5, 1):
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(share)}" y2="{y(share)}" stroke="#ccc"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(share) + 4}" font-size="11" text-anchor="end">{share:.0%}</text>')
    return out


def _band(band: Band, x, end: datetime) -> str:
    left, right = x(band.start), x(band.end or end)
    width = max(right - left, 3.0)
    label = escape(band.label)
    state = "open" if band.end is None else "recovered"
    near_end = left > LEFT + 0.6 * (WIDTH - LEFT - RIGHT)  # the label goes left of the band, inside the picture
    anchor = f'x="{left - 3}" text-anchor="end"' if near_end else f'x="{left + 3}"'
    return (
        f'<g class="alert-band alert-{state}" data-monitor="{escape(band.kind)}"><title>{label}</title>'
        f'<rect x="{left}" y="{TOP}" width="{width}" height="{HEIGHT - TOP - BOTTOM}" fill="#e33" fill-opacity="0.18"/>'
        f'<text {anchor} y="{TOP + 12}" font-size="11" fill="#a00">{label}</text></g>'
    )


def _line(steps: list[dict], key: str, color: str, x, y) -> str:
    """The figure's points joined across steps where nothing was counted (a quiet spell is not a fall)."""
    points = [f"{x(step['at'])},{y(step[key])}" for step in steps if step.get(key) is not None]
    marks = "".join(f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2" fill="{color}"/>' for p in points)
    line = f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" stroke-width="2"/>' if points else ""
    return f'<g class="series series-{key}">{line}{marks}</g>'


def _axis(start: datetime, end: datetime) -> list[str]:
    bottom = HEIGHT - BOTTOM + 16
    return [
        f'<text x="{LEFT}" y="{bottom}" font-size="11">{start:%Y-%m-%d %H:%M:%S} UTC</text>',
        f'<text x="{WIDTH - RIGHT}" y="{bottom}" font-size="11" text-anchor="end">{end:%H:%M:%S} UTC</text>',
    ]


def _legend() -> list[str]:
    out, left = [], LEFT
    for _key, label, color in LINES:
        out.append(f'<rect x="{left}" y="6" width="12" height="4" fill="{color}"/>')
        out.append(f'<text x="{left + 16}" y="12" font-size="11">{label}</text>')
        left += 24 + 7 * len(label)
    out.append(f'<rect x="{left}" y="4" width="12" height="8" fill="#e33" fill-opacity="0.3"/>')
    out.append(f'<text x="{left + 16}" y="12" font-size="11">alert</text>')
    return out
