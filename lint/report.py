"""`overlay-lint report`: one self-contained HTML page for people (docs/design.md §2.3).

Everything on the page comes from the values `check` and `simulate` print: the located findings,
the core's report (statuses, matched cells) and the cell effects `simulate --format json` lists.
Nothing is recomputed here. No script and no external asset: the charts are inline SVG drawn
here, so the page opens offline and from a mail attachment alike. Every name is user input and
passes through `_e`; every list is capped with "and N more" so a huge input stays a small page.
The numbers carry data-* attributes (exact values) so tests compare them with `simulate`.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lint import formats, views
from simulation.analysis import report as rp
from simulation.analysis.effects import CellEffect
from simulation.findings import Finding, Severity
from sources.positions import Location

VERDICTS = ("Conflict", "Invalid", "Applied")
CONFLICT = "same-weight-conflict"


@dataclasses.dataclass(frozen=True)
class Limits:
    """Caps on what one page shows; the rest is counted in an "and N more" line."""

    rows: int = 200  # overlays per verdict, conflicts, other findings
    pools: int = 30  # charts, and matrix columns
    bars: int = 20  # instance types per chart (those whose price changes most)
    matrix_rows: int = 200


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _number(value: float) -> str:
    """Exact for data-* attributes: repr round-trips a float."""
    return repr(float(value))


def _more(total: int, shown: int, what: str, tag: str = "p") -> str:
    left = total - shown
    return f'<{tag} class="more" data-more="{left}">and {left} more {_e(what)}</{tag}>' if left > 0 else ""


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left;
vertical-align:top}th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.Applied{color:#1a7f37}.Conflict{color:#cf222e}.Invalid{color:#9a6700}.error{color:#cf222e}.warning{color:#9a6700}
.badge{display:inline-block;border-radius:1em;padding:0 .6em;margin-right:.5em;background:#eee}
.more{color:#666;font-style:italic}.hint{color:#555}code{background:#f6f8fa;padding:0 .2em}
td.zero{color:#bbb}svg{display:block;margin:.3em 0 1em}svg text{font:11px system-ui,sans-serif}
.legend span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}
"""

BASE_COLOR, PRICE_COLOR = "#9aa5b1", "#0969da"


def render(result: formats.Output, report: rp.Report, cells: Sequence[CellEffect],
           limits: Limits = Limits()) -> str:
    located = result.located()
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>overlay-lint report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>NodeOverlay report</h1>",
        _summary(result, report),
        _notes(result.notes),
        _verdicts(report, located, limits),
        _conflicts(located, limits),
        _findings(located, limits),
        _charts(report, cells, limits),
        _memory(cells, limits),
        _matrix(report, limits),
        "</body></html>\n",
    ]
    return "\n".join(p for p in parts if p)


def _summary(result: formats.Output, report: rp.Report) -> str:
    counts = {v: sum(1 for s in report.status.values() if s.state == v) for v in VERDICTS}
    badges = "".join(f'<span class="badge {v}" data-verdict-count="{v}" data-count="{n}">{n} {v}</span>'
                     for v, n in counts.items())
    errors, warnings = result.count(Severity.ERROR), result.count(Severity.WARNING)
    pools = len(report.grid.pools)
    return (f'<p id="summary">{badges}<span class="badge" data-errors="{errors}">{formats.plural(errors, "error")}'
            f'</span><span class="badge" data-warnings="{warnings}">{formats.plural(warnings, "warning")}</span>'
            f'<span class="badge" data-nodepools="{pools}">{formats.plural(pools, "NodePool")}</span></p>')


def _notes(notes: Sequence[str]) -> str:
    if not notes:
        return ""
    return '<ul id="notes">' + "".join(f"<li>note: {_e(n)}</li>" for n in notes) + "</ul>"


def _where(finding: Finding, loc: Location) -> str:
    return _e(formats.where(finding, loc))


def _verdicts(report: rp.Report, located: Sequence[tuple[Finding, Location]], limits: Limits) -> str:
    codes: dict[str, list[str]] = {}
    for f, _ in located:
        if f.obj.kind == "NodeOverlay":
            codes.setdefault(f.obj.name, []).append(f.code)
    out = ['<section id="overlays"><h2>Overlays by verdict</h2>']
    if not report.status:
        out.append("<p>No NodeOverlays in the input.</p>")
    for verdict in VERDICTS:
        names = sorted(n for n, s in report.status.items() if s.state == verdict)
        if not names:
            continue
        out.append(f'<h3 class="{verdict}">{verdict} ({len(names)})</h3>')
        out.append("<table><tr><th>overlay</th><th>weight</th><th>reason</th><th>findings</th></tr>")
        for name in names[:limits.rows]:
            reason = report.status[name].reason
            checked = report.overlays.get(name)
            weight = checked.overlay.weight if checked is not None else ""
            found = ", ".join(sorted(set(codes.get(name, []))))
            out.append(f'<tr data-overlay="{_e(name)}" data-status="{verdict}"><td>{_e(name)}</td>'
                       f'<td class="n">{_e(weight)}</td><td>{_e(reason) or "-"}</td><td>{_e(found)}</td></tr>')
        out.append("</table>" + _more(len(names), limits.rows, f"{verdict} overlays"))
    out.append("</section>")
    return "\n".join(out)


def _witness(f: Finding) -> str:
    w = f.witness
    if w is None:
        return "-"
    offering = f"{w.offering.zone}/{w.offering.capacity_type}" if w.offering is not None else "-"
    return (f'<span data-witness-nodepool="{_e(w.nodepool)}" data-witness-type="{_e(w.instance_type)}" '
            f'data-witness-offering="{_e(offering)}">NodePool <b>{_e(w.nodepool)}</b>, instance type '
            f"<b>{_e(w.instance_type)}</b>, offering <b>{_e(offering)}</b></span>")


def _karpenter(detail: Mapping[str, str]) -> str:
    if detail.get("karpenter") == "Conflict":
        dropped = detail.get("dropped", "")
        return f'marks <b data-dropped="{_e(dropped)}">{_e(dropped)}</b> Conflict and ignores it whole'
    return "silently applies one value (no Conflict status)"


def _conflicts(located: Sequence[tuple[Finding, Location]], limits: Limits) -> str:
    found = [(f, loc) for f, loc in located if f.code == CONFLICT]
    out = [f'<section id="conflicts"><h2>Conflicts ({len(found)})</h2>']
    if not found:
        out.append("<p>No same-weight conflicts.</p>")
    else:
        out.append("<table><tr><th>overlay</th><th>with</th><th>field</th><th>weight</th><th>witness</th>"
                   "<th>Karpenter</th><th>where</th></tr>")
        for f, loc in found[:limits.rows]:
            detail = dict(f.detail)
            others = ", ".join(r.name for r in f.related)
            out.append(f'<tr class="conflict" data-overlay="{_e(f.obj.name)}"><td>{_e(f.obj.name)}</td>'
                       f"<td>{_e(others)}</td><td>{_e(detail.get('field', f.field))}</td>"
                       f'<td class="n">{_e(detail.get("weight", ""))}</td><td>{_witness(f)}</td>'
                       f"<td>{_karpenter(detail)}</td><td><code>{_where(f, loc)}</code></td></tr>")
            if f.hint:
                out.append(f'<tr><td colspan="7" class="hint">fix: {_e(f.hint)}</td></tr>')
        out.append("</table>" + _more(len(found), limits.rows, "conflicts"))
    out.append("</section>")
    return "\n".join(out)


def _findings(located: Sequence[tuple[Finding, Location]], limits: Limits) -> str:
    found = [(f, loc) for f, loc in located if f.code != CONFLICT]
    if not found:
        return ""
    out = [f'<section id="findings"><h2>Other findings ({len(found)})</h2>',
           "<table><tr><th>severity</th><th>code</th><th>object</th><th>message</th><th>where</th></tr>"]
    for f, loc in found[:limits.rows]:
        out.append(f'<tr data-code="{_e(f.code)}"><td class="{f.severity}">{f.severity}</td>'
                   f"<td>{_e(f.code)}</td><td>{_e(f.obj)}</td><td>{_e(f.message)}</td>"
                   f"<td><code>{_where(f, loc)}</code></td></tr>")
    out.append("</table>" + _more(len(found), limits.rows, "findings"))
    out.append("</section>")
    return "\n".join(out)


@dataclasses.dataclass(frozen=True)
class _Bar:
    instance_type: str
    offering: Mapping[str, object]

    @property
    def base(self) -> float:
        return float(self.offering["basePrice"])  # type: ignore[arg-type]

    @property
    def price(self) -> float:
        return float(self.offering["price"])  # type: ignore[arg-type]


def _priced(cell: CellEffect) -> list[Mapping[str, Any]]:
    """The offerings whose price an overlay changes and that could be launched at it."""
    return [o for o in cell.offerings if o.get("priceOverlay") and o.get("available", True)
            and o.get("basePrice") is not None and o.get("price") is not None]


def _bars(cells: Iterable[CellEffect]) -> tuple[list[_Bar], int]:
    """Per instance type the NodePool launches, the offering it launches whose price an overlay changes
    most, largest changes first; and how many types with a price change it never launches."""
    bars, held = [], 0
    for cell in cells:
        priced = _priced(cell)
        launched = [o for o in priced if o.get("launchable", True)]
        if launched:
            top = max(launched, key=lambda o: abs(float(o["price"]) - float(o["basePrice"])))
            bars.append(_Bar(cell.instance_type, top))
        elif priced:
            held += 1
    return sorted(bars, key=lambda b: (-abs(b.price - b.base), b.instance_type)), held


def _charts(report: rp.Report, cells: Sequence[CellEffect], limits: Limits) -> str:
    by_pool: dict[str, list[CellEffect]] = {}
    for cell in cells:
        by_pool.setdefault(cell.pool, []).append(cell)
    pools = [p.name for p in report.grid.pools]
    out = ['<section id="prices"><h2>Price effect per NodePool</h2>',
           f'<p class="legend"><span style="background:{BASE_COLOR}"></span>base price '
           f'<span style="background:{PRICE_COLOR}"></span>effective price (USD per hour): per instance type, '
           f"the offering whose price changes most; the {limits.bars} largest changes</p>"]
    for pool in pools[:limits.pools]:
        bars, held = _bars(by_pool.get(pool, ()))
        out.append(f'<div class="pool" data-nodepool="{_e(pool)}"><h3>NodePool {_e(pool)}</h3>')
        if bars:
            out.append(_chart(pool, bars[:limits.bars]))
            out.append(_more(len(bars), limits.bars, "instance types with a price change"))
        else:
            out.append("<p>No overlay changes a price this NodePool launches at.</p>")
        if held:
            out.append(f'<p class="more" data-held="{held}">and {held} instance type{"s" if held > 1 else ""} '
                       f"with a price change {_e(views.HELD)}</p>")
        out.append("</div>")
    out.append(_more(len(pools), limits.pools, "NodePools"))
    out.append("</section>")
    return "\n".join(out)


def _chart(pool: str, bars: Sequence[_Bar]) -> str:
    label, width, row, bar = 260, 420, 26, 10
    top = max(max(b.base, b.price) for b in bars) or 1.0
    height = row * len(bars) + 6
    out = [f'<svg class="chart" role="img" aria-label="prices in NodePool {_e(pool)}" '
           f'xmlns="http://www.w3.org/2000/svg" width="{label + width + 220}" height="{height}">']
    for i, b in enumerate(bars):
        y = i * row + 3
        o = b.offering
        where = f"{o['zone']}/{o['capacityType']}"
        attrs = (f'data-nodepool="{_e(pool)}" data-type="{_e(b.instance_type)}" data-zone="{_e(o["zone"])}" '
                 f'data-capacity-type="{_e(o["capacityType"])}" data-base="{_number(b.base)}" '
                 f'data-price="{_number(b.price)}" data-overlay="{_e(o["priceOverlay"])}"')
        tip = (f"{b.instance_type} {where}: {views.price(b.base)} -> {views.price(b.price)} "
               f"({o['priceOverlay']})")
        out.append(f'<g class="bar" {attrs}><title>{_e(tip)}</title>'
                   f'<text x="{label - 6}" y="{y + bar + 2}" text-anchor="end">{_e(b.instance_type)} '
                   f"{_e(where)}</text>"
                   f'<rect x="{label}" y="{y}" width="{width * b.base / top:.1f}" height="{bar}" '
                   f'fill="{BASE_COLOR}"/>'
                   f'<rect x="{label}" y="{y + bar + 1}" width="{width * b.price / top:.1f}" height="{bar}" '
                   f'fill="{PRICE_COLOR}"/>'
                   f'<text x="{label + width * max(b.base, b.price) / top + 4:.1f}" y="{y + bar + 2}">'
                   f"{_e(views.price(b.base))} → {_e(views.price(b.price))}</text></g>")
    out.append("</svg>")
    return "".join(out)


def _memory(cells: Sequence[CellEffect], limits: Limits) -> str:
    """Cells where hugepages are in effect and the NodePool launches the type: the capacity's memory beside the
    allocatable memory. Those its NodePool never launches are counted apart, as the store still holds them."""
    found = [(c, mem) for c in cells if (mem := c.memory) is not None]
    rows = [(c, mem) for c, mem in found if c.launchable]
    held = len(found) - len(rows)
    if not found:
        return ""
    out = ['<section id="memory"><h2>Memory after hugepages</h2>',
           "<p>Karpenter takes every hugepages-* capacity off the allocatable memory, clamped at 0.</p>",
           "<table><tr><th>NodePool</th><th>instance type</th><th>memory (capacity)</th><th>hugepages</th>"
           "<th>memory (allocatable)</th></tr>"]
    for c, mem in rows[:limits.rows]:
        left = "n zero" if mem.exhausted else "n"
        out.append(f'<tr data-nodepool="{_e(c.pool)}" data-instance-type="{_e(c.instance_type)}">'
                   f"<td>{_e(c.pool)}</td><td>{_e(c.instance_type)}</td>"
                   f'<td class="n">{_e(c.capacity.get("memory", "0"))}</td>'
                   f'<td class="n">{_e(views.memory_note(mem))}</td>'
                   f'<td class="{left}" data-allocatable="{_e(mem.text)}">{_e(mem.text)}</td></tr>')
    out.append("</table>")
    out.append(_more(len(rows), limits.rows, "instance types"))
    if held:
        out.append(f'<p class="more" data-held="{held}">and {held} instance type{"s" if held > 1 else ""} '
                   f"with hugepages {_e(views.HELD)}</p>")
    out.append("</section>")
    return "\n".join(out)


def matched(report: rp.Report, launched: bool = False) -> dict[str, dict[str, int]]:
    """Overlay -> NodePool -> (NodePool, instance type) cells its requirements match (valid overlays);
    `launched`: only those of types the NodePool launches."""
    grid = report.grid
    pools = [p.name for p in grid.pools]
    launches = grid.type_cells(grid.launched)
    out: dict[str, dict[str, int]] = {}
    for name, entry in report.entries.items():
        counts = out.setdefault(name, {})
        for pool_bits, block in (entry.type_cells & launches if launched else entry.type_cells).parts:
            n = block.bit_count()
            for index, pool in enumerate(pools):
                if pool_bits >> index & 1:
                    counts[pool] = counts.get(pool, 0) + n
    return out


def _matrix(report: rp.Report, limits: Limits) -> str:
    pools = [p.name for p in report.grid.pools]
    shown = pools[:limits.pools]
    counts, launched = matched(report), matched(report, launched=True)
    names = sorted(report.status)
    out = ['<section id="matrix"><h2>Matched cells: overlays &times; NodePools</h2>',
           "<p>(NodePool, instance type) cells each overlay's requirements select; where the NodePool "
           "launches fewer of them, how many it launches (Karpenter's overlay store holds the rest).</p>",
           "<table><tr><th>overlay</th>" + "".join(f"<th>{_e(p)}</th>" for p in shown) + "</tr>"]
    for name in names[:limits.matrix_rows]:
        status = report.status[name].state
        row = [f'<tr data-overlay="{_e(name)}"><td class="{status}">{_e(name)}</td>']
        for pool in shown:
            if name not in counts:
                row.append(f'<td class="zero" data-nodepool="{_e(pool)}">{status}</td>')
                continue
            n, m = counts[name].get(pool, 0), launched[name].get(pool, 0)
            zero = ' class="n zero"' if n == 0 else ' class="n"'
            text = f"{n} ({m} launched)" if m < n else str(n)
            row.append(f'<td{zero} data-nodepool="{_e(pool)}" data-cells="{n}" data-launched="{m}">{text}</td>')
        out.append("".join(row) + "</tr>")
    out.append("</table>")
    out.append(_more(len(names), limits.matrix_rows, "overlays"))
    out.append(_more(len(pools), limits.pools, "NodePools"))
    out.append("</section>")
    return "\n".join(out)
