"""`overlay-lint report --diff`: the report's self-contained HTML page for a change (before/after).

The same page as lint/report.py (its stylesheet, escaping, "and N more" caps and inline SVG charts, shared
from that module rather than copied), filled from the `Diff` that `overlay-lint diff` prints: the overlays
whose spec or status changes, per NodePool the offerings whose effective price changes (a chart of before
against after, then the rows), capacity and allocatable changes, findings introduced and resolved. The
numbers carry data-* attributes with exact values, so tests compare them with `diff --format json`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lint import diffview, formats, views
from lint import report as page
from simulation.analysis import diff
from simulation.findings import Finding

_e, _more = page._e, page._more
LIMITS = page.Limits()


def render(view: diffview.Page, limits: page.Limits = LIMITS) -> str:
    d = view.diff
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>overlay-lint diff report</title>",
        f"<style>{page._STYLE}</style></head><body>",
        "<h1>NodeOverlay change report</h1>",
        f'<p id="sides">before: <code data-base="{_e(view.base)}">{_e(view.base)}</code>, after: '
        f'<code data-head="{_e(view.head)}">{_e(view.head)}</code></p>',
        f'<p id="headline" data-offerings="{d.offerings()}" data-resources="{len(d.resources)}" '
        f'data-introduced="{len(d.introduced)}" data-resolved="{len(d.resolved)}">'
        f"<b>{_e(diffview.headline(d))}</b></p>",
        '<ul id="notes">' + "".join(f"<li>note: {_e(n)}</li>" for n in view.notes) + "</ul>" if view.notes else "",
        _overlays(d, limits),
        _prices(d, limits),
        _resources(d, limits),
        _findings(view, "introduced", d.introduced, limits),
        _findings(view, "resolved", d.resolved, limits),
        "</body></html>\n",
    ]
    return "\n".join(p for p in parts if p)


def _state(status: object) -> str:
    return getattr(status, "state", "-")


def _overlays(d: diff.Diff, limits: page.Limits) -> str:
    out = [f'<section id="overlays"><h2>Overlays ({len(d.overlays)} changed, {d.unchanged} unchanged)</h2>']
    if d.overlays:
        out.append("<table><tr><th>overlay</th><th>change</th><th>before</th><th>after</th><th>reason after</th>"
                   "</tr>")
        for c in d.overlays[:limits.rows]:
            before, after = _state(c.before), _state(c.after)
            name = f"{c.renamed_from} → {c.name}" if c.renamed_from else c.name
            flag = ' class="Conflict"' if c.stops_applying else ""
            out.append(f'<tr{flag} data-overlay="{_e(c.name)}" data-change="{_e(c.change)}" '
                       f'data-before="{_e(before)}" data-after="{_e(after)}"><td>{_e(name)}</td>'
                       f'<td>{_e(c.change)}</td><td class="{_e(before)}">{_e(before)}</td>'
                       f'<td class="{_e(after)}">{_e(after)}</td>'
                       f"<td>{_e(c.after.reason if c.after is not None else '') or '-'}</td></tr>")
        out.append("</table>" + _more(len(d.overlays), limits.rows, "overlays"))
    out.append("</section>")
    return "\n".join(out)


def _bars(rows: Sequence[diff.PriceChange]) -> list[page._Bar]:
    """The chart's bars: before as the grey bar, after as the blue one (rows priced on both sides)."""
    return [page._Bar(r.instance_type, {"zone": r.zone, "capacityType": r.capacity_type, "basePrice": r.before,
                                         "price": r.after, "priceOverlay": r.after_overlay or "-"})
            for r in rows if r.before is not None and r.after is not None]


def _prices(d: diff.Diff, limits: page.Limits) -> str:
    by_pool: dict[str, list[diff.PriceChange]] = {}
    for p in d.prices:
        by_pool.setdefault(p.pool, []).append(p)
    summaries = [s for s in d.pools if s.offerings]
    out = ['<section id="prices"><h2>Effective prices per NodePool</h2>',
           f'<p class="legend"><span style="background:{page.BASE_COLOR}"></span>before '
           f'<span style="background:{page.PRICE_COLOR}"></span>after (USD per hour); the {limits.bars} largest '
           "changes</p>"]
    if not summaries:
        out.append("<p>No effective price changes.</p>")
    for s in summaries[:limits.pools]:
        rows = by_pool[s.pool]
        out.append(f'<div class="pool" data-nodepool="{_e(s.pool)}" data-offerings="{s.offerings}">'
                   f"<h3>NodePool {_e(s.pool)}: {_e(diffview.pool_line(s))}</h3>")
        bars = _bars(rows[:limits.bars])
        if bars:
            out.append(page._chart(s.pool, bars))
        out.append("<table><tr><th>instance type</th><th>offering</th><th>before</th><th>after</th><th>change</th>"
                   "<th>set by</th></tr>")
        for r in rows[:limits.rows]:
            attrs = (f'data-nodepool="{_e(r.pool)}" data-type="{_e(r.instance_type)}" data-zone="{_e(r.zone)}" '
                     f'data-capacity-type="{_e(r.capacity_type)}" data-before="{_exact(r.before)}" '
                     f'data-after="{_exact(r.after)}"')
            out.append(f'<tr class="price" {attrs}><td>{_e(r.instance_type)}</td>'
                       f"<td>{_e(r.zone)}/{_e(r.capacity_type)}</td>"
                       f'<td class="n">{_e(views.price(r.before, r.estimated))}</td>'
                       f'<td class="n">{_e(views.price(r.after, r.estimated))}</td>'
                       f'<td class="n">{_e(diffview.change_text(r))}</td>'
                       f"<td>{_e(diffview.set_by(r.before_overlay, r.after_overlay, '→'))}</td></tr>")
        out.append("</table>" + _more(len(rows), limits.rows, "offerings") + "</div>")
    out.append(_more(len(summaries), limits.pools, "NodePools"))
    out.append("</section>")
    return "\n".join(out)


def _exact(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def _resources(d: diff.Diff, limits: page.Limits) -> str:
    if not d.resources:
        return ""
    out = [f'<section id="capacity"><h2>Capacity and allocatable ({len(d.resources)} changes)</h2>',
           "<table><tr><th>NodePool</th><th>instance type</th><th>resource</th><th>figure</th><th>before</th>"
           "<th>after</th><th>set by</th></tr>"]
    for r in d.resources[:limits.rows]:
        out.append(f'<tr class="resource" data-nodepool="{_e(r.pool)}" data-type="{_e(r.instance_type)}" '
                   f'data-resource="{_e(r.resource)}" data-figure="{r.figure}" data-before="{_e(r.before or "")}" '
                   f'data-after="{_e(r.after or "")}"><td>{_e(r.pool)}</td><td>{_e(r.instance_type)}</td>'
                   f"<td>{_e(r.resource)}</td><td>{r.figure}</td><td class=\"n\">{_e(r.before or '-')}</td>"
                   f"<td class=\"n\">{_e(r.after or '-')}</td>"
                   f"<td>{_e(diffview.set_by(r.before_overlay, r.after_overlay, '→'))}</td></tr>")
    out.append("</table>" + _more(len(d.resources), limits.rows, "changes") + "</section>")
    return "\n".join(out)


def _findings(view: diffview.Page, title: str, found: Sequence[Finding], limits: page.Limits) -> str:
    if not found:
        return ""
    out = [f'<section id="{title}"><h2>Findings {title} ({len(found)})</h2>',
           "<table><tr><th>severity</th><th>code</th><th>object</th><th>message</th><th>where</th></tr>"]
    for f in found[:limits.rows]:
        loc = view.table.locate(f)
        out.append(f'<tr data-code="{_e(f.code)}" data-{title}="{_e(f.obj.name)}"><td class="{f.severity}">'
                   f"{f.severity}</td><td>{_e(f.code)}</td><td>{_e(f.obj)}</td><td>{_e(f.message)}</td>"
                   f"<td><code>{_e(formats.where(f, loc))}</code></td></tr>")
    out.append("</table>" + _more(len(found), limits.rows, "findings") + "</section>")
    return "\n".join(out)
