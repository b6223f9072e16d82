"""A project's health over time as a small SVG picture, drawn on the server (no script, no CDN):
the share of fetches answered and the lowest watched-field coverage of its rule sets, per step,
with a band for each alert from its start to its recovery. Pure: figures in, markup out.

Each band's label starts over its band (or ends over it, near the right edge) on the first row
where it overlaps no other label. Times are written in UTC with their instant in `data-at`: the
dashboard's script shows them in the browser's time, as it does the other charts'."""

from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 1000, 220, 44, 12, 26, 28
CHAR_WIDTH, ROW_HEIGHT, GAP = 6.5, 15, 8  # a label's width, guessed generously: 11 px text is ~5.5 a character
TICKS = 6
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
        *_bands(bands, x, end),
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


def _bands(bands: list[Band], x, end: datetime) -> list[str]:
    """Each band, its label on the first row free where the label goes (oldest band first)."""
    rows: list[float] = []  # per row: where its last label ends
    out = []
    for band in sorted(bands, key=lambda b: b.start):
        left, right = x(band.start), x(band.end or end)
        span = _label_span(band.label, left, right)
        row = next((i for i, ends in enumerate(rows) if ends + GAP <= span[0]), len(rows))
        if row == len(rows):
            rows.append(span[1])
        rows[row] = span[1]
        out.append(_band(band, left, right, span, row))
    return out


def _label_span(label: str, left: float, right: float) -> tuple[float, float]:
    """Where a label goes: from its band's start, or ending at its band's end when it would leave
    the picture (never left of the plot)."""
    width = CHAR_WIDTH * len(label)
    if left + 3 + width <= WIDTH - RIGHT:
        return left + 3, left + 3 + width
    start = max(max(right, left + 3) - 3 - width, LEFT)
    return start, start + width


def _band(band: Band, left: float, right: float, span: tuple[float, float], row: int) -> str:
    label = escape(band.label)
    state = "open" if band.end is None else "recovered"
    width = max(right - left, 3.0)
    y = TOP + 12 + row * ROW_HEIGHT
    return (
        f'<g class="alert-band alert-{state}" data-monitor="{escape(band.kind)}"><title>{label}</title>'
        f'<rect x="{left}" y="{TOP}" width="{width}" height="{HEIGHT - TOP - BOTTOM}" fill="#e33" fill-opacity="0.18"/>'
        f'<text x="{round(span[0], 1)}" y="{y}" font-size="11" fill="#a00" stroke="#fff" stroke-width="3" '
        f'paint-order="stroke">{label}</text></g>'
    )


def _line(steps: list[dict], key: str, color: str, x, y) -> str:
    """The figure's points joined across steps where nothing was counted (a quiet spell is not a fall)."""
    points = [f"{x(step['at'])},{y(step[key])}" for step in steps if step.get(key) is not None]
    marks = "".join(f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2" fill="{color}"/>' for p in points)
    line = f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" stroke-width="2"/>' if points else ""
    return f'<g class="series series-{key}">{line}{marks}</g>'


def _axis(start: datetime, end: datetime) -> list[str]:
    """TICKS times along the bottom, in UTC until the page's script writes them in the browser's time."""
    bottom, step = HEIGHT - BOTTOM + 16, (end - start) / (TICKS - 1)
    out = []
    for i in range(TICKS):
        moment = start + step * i
        anchor = "start" if i == 0 else "end" if i == TICKS - 1 else "middle"
        left = LEFT + i * (WIDTH - LEFT - RIGHT) / (TICKS - 1)
        out.append(
            f'<text class="time" data-at="{moment.isoformat()}" x="{round(left, 1)}" y="{bottom}" font-size="11" '
            f'text-anchor="{anchor}">{moment:%H:%M} UTC</text>'
        )
    return out


def _legend() -> list[str]:
    out, left = [], LEFT
    for _key, label, color in LINES:
        out.append(f'<rect x="{left}" y="6" width="12" height="4" fill="{color}"/>')
        out.append(f'<text x="{left + 16}" y="12" font-size="11">{label}</text>')
        left += 24 + 7 * len(label)
    out.append(f'<rect x="{left}" y="4" width="12" height="8" fill="#e33" fill-opacity="0.3"/>')
    out.append(f'<text x="{left + 16}" y="12" font-size="11">alert</text>')
    return out
