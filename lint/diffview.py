"""`overlay-lint diff` for people and programs: text for a terminal, Markdown for a pull-request comment,
JSON (lint/schemas/diff-output.schema.json). All three show the one `simulation.analysis.diff.Diff`.

Large changes are summarised: per NodePool the number of offerings whose price changes, the median and
the extremes of the change, then the largest rows and "and N more"; unchanged overlays are counted, not
listed. The Markdown stays within GitHub's comment limit: it is made of whole blocks (a table, a collapsed
section) and, when too long, blocks are left out from the middle with a count.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from typing import Any, TextIO

from lint import formats, views
from simulation.analysis import diff
from simulation.analysis import report as rp
from simulation.findings import Finding, Severity
from sources.positions import Table

# GitHub refuses an issue or pull-request comment longer than this (characters).
COMMENT_LIMIT = 65_536
# The hidden first line a bot finds its own comment by; `changes=` says whether there is anything to show.
MARKER = "<!-- overlay-lint:diff"
# Rows per table (per NodePool for prices) in text and Markdown; JSON lists more.
ROWS = 10
JSON_ROWS = 1000
OVERLAY_ROWS = 50
POOLS = 50
_CELL = 200


@dataclasses.dataclass(frozen=True)
class Page:
    diff: diff.Diff
    table: Table
    base: str
    head: str
    notes: Sequence[str] = ()


@dataclasses.dataclass(frozen=True)
class ClusterPage:
    """One cluster of a fleet the change touches; `change`: changed, added or removed (lint/fleetsides.py)."""

    cluster: str
    change: str
    page: Page


@dataclasses.dataclass(frozen=True)
class FleetPage:
    """A change to a repository of many clusters: the clusters it touches, each compared alone."""

    clusters: Sequence[ClusterPage]
    # Clusters on both sides that the change leaves as they were.
    unchanged: Sequence[str]
    base: str
    head: str
    notes: Sequence[str] = ()


def _fleet_headline(fleet: FleetPage) -> str:
    total = len(fleet.clusters) + len(fleet.unchanged)
    return f"{_plural(len(fleet.clusters), 'cluster')} of {total} changed"


def _cluster_title(c: ClusterPage) -> str:
    return c.cluster if c.change == "changed" else f"{c.cluster} ({c.change})"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def change_text(p: diff.PriceChange) -> str:
    if not p.present_before:
        return "new offering"
    if not p.present_after:
        return "offering gone"
    if p.before is None or p.after is None:
        return "priced" if p.after is not None else "unpriced"
    return _pct(p.percent) if p.before else "from 0"


def _status(status: rp.Status | None) -> str:
    return "-" if status is None else status.state


def _status_long(status: rp.Status | None) -> str:
    if status is None:
        return "-"
    return f"{status.state} ({status.reason})" if status.reason else status.state


def set_by(before: str | None, after: str | None, arrow: str = "->") -> str:
    return (after or "-") if before == after else f"{before or '-'} {arrow} {after or '-'}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def headline(d: diff.Diff) -> str:
    """One line: what a reviewer must know first."""
    if d.empty:
        return "no change to NodeOverlay statuses, prices or capacity"
    parts = []
    stops = [c for c in d.overlays if c.stops_applying]
    if stops:
        parts.append(f"{_plural(len(stops), 'overlay')} stop{'s' if len(stops) == 1 else ''} applying")
    kinds = [(kind, sum(1 for c in d.overlays if c.change == kind))
             for kind in (diff.ADDED, diff.REMOVED, diff.RENAMED, diff.CHANGED)]
    if any(n for _, n in kinds):
        parts.append("overlays " + ", ".join(f"{n} {kind}" for kind, n in kinds if n))
    if d.prices:
        offerings, up, down = _offering_counts(d)
        parts.append(f"{_plural(offerings, 'offering')} change price ({up} dearer, {down} cheaper)")
    if d.resources:
        parts.append(_plural(len(d.resources), "capacity change"))
    if d.held:
        parts.append(f"{_plural(_held_count(d.held), 'change')} only where no NodePool launches")
    errors = sum(1 for f in d.introduced if f.severity == Severity.ERROR)
    if errors:
        parts.append(f"{_plural(errors, 'new error')}")
    if d.introduced or d.resolved:
        parts.append(f"findings {len(d.introduced)} new, {len(d.resolved)} resolved")
    return "; ".join(parts)


def _offering_counts(d: diff.Diff) -> tuple[int, int, int]:
    """Offerings whose price changes, dearer, cheaper: each counted once however many NodePools launch it."""
    up = len({p.offering for p in d.prices if (pct := p.percent) is not None and pct > 0})
    down = len({p.offering for p in d.prices if (pct := p.percent) is not None and pct < 0})
    return d.offerings(), up, down


def _held_count(held: diff.Held) -> int:
    return held.prices + held.resources + held.templates


def held_line(held: diff.Held) -> str:
    """What changes only in cells no NodePool launches, said once."""
    parts = [_plural(n, what) for n, what in ((held.prices, "offering price"), (held.resources, "capacity figure"),
                                               (held.templates, "template")) if n]
    return (f"Karpenter's overlay store also changes {', '.join(parts)} on cells no NodePool launches "
            f"(not listed; `overlay-lint simulate --nodepool NAME --instance-type NAME` shows one)")


def effect_text(e: diff.Effect) -> str:
    """A changed overlay's effect on what NodePools launch."""
    parts = []
    if e.offerings:
        parts.append(f"prices {_plural(e.offerings, 'offering')}" + (f" (median {_pct(e.median)})"
                                                                     if e.median is not None else ""))
    if e.released:
        parts.append(f"no longer prices {_plural(e.released, 'offering')}")
    if e.resources:
        parts.append(_plural(e.resources, "capacity change"))
    if e.templates:
        parts.append(_plural(e.templates, "template change"))
    return ", ".join(parts) or "nothing a NodePool launches"


@dataclasses.dataclass(frozen=True)
class Folded:
    """Price rows of one instance type with one change, folded: the offerings (zone/capacity type) they cover."""

    first: diff.PriceChange
    offerings: tuple[str, ...]

    @property
    def where(self) -> str:
        return self.offerings[0] if len(self.offerings) == 1 else f"{len(self.offerings)} offerings"


def folded(rows: Sequence[diff.PriceChange]) -> list[Folded]:
    """A type's zones and capacity types with the same change in one row, in the order of their largest."""
    groups: dict[tuple[Any, ...], list[diff.PriceChange]] = {}
    for p in rows:
        key = (p.instance_type, p.before, p.after, p.before_overlay, p.after_overlay, p.present_before,
               p.present_after, p.estimated)
        groups.setdefault(key, []).append(p)
    return [Folded(g[0], tuple(f"{p.zone}/{p.capacity_type}" for p in g)) for g in groups.values()]


def pool_line(s: diff.PoolSummary) -> str:
    text = f"{_plural(s.offerings, 'offering')} change price"
    if s.median is not None:
        text += f", median {_pct(s.median)} ({_pct(s.lowest)} to {_pct(s.highest)})"
    if s.resources:
        text += f"; {_plural(s.resources, 'capacity change')}"
    return text


def _by_pool(d: diff.Diff) -> dict[str, list[diff.PriceChange]]:
    out: dict[str, list[diff.PriceChange]] = {}
    for p in d.prices:
        out.setdefault(p.pool, []).append(p)
    return out


# --- text -------------------------------------------------------------------------------------------------

def write_text(page: Page, out: TextIO) -> None:
    d = page.diff
    out.write(f"overlay-lint diff {page.base} -> {page.head}\n{headline(d)}\n")
    _text_overlays(d, out)
    _text_nodepools(d, out)
    _text_prices(d, out)
    _text_cells(d, out)
    for title, found in (("introduced", d.introduced), ("resolved", d.resolved)):
        if found:
            out.write(f"\nFindings {title} ({len(found)})\n")
            for f in found:
                loc = page.table.locate(f)
                out.write(f"  {formats.where(f, loc)}: {f.severity} {f.code} {formats.subject(f, loc)}: "
                          f"{f.message}\n")


def _text_prices(d: diff.Diff, out: TextIO) -> None:
    prices = _by_pool(d)
    summaries = [s for s in d.pools if s.offerings]
    if summaries:
        out.write("\nPrices (USD per hour)\n")
    for s in summaries[:POOLS]:
        rows = prices[s.pool]
        out.write(f"  NodePool {s.pool}: {pool_line(s)}\n")
        groups = folded(rows)
        table = [["INSTANCE TYPE", "OFFERING", "BEFORE", "AFTER", "CHANGE", "SET BY"]]
        table += [[f.first.instance_type, f.where, views.price(f.first.before, f.first.estimated),
                   views.price(f.first.after, f.first.estimated), change_text(f.first),
                   set_by(f.first.before_overlay, f.first.after_overlay)] for f in groups[:ROWS]]
        out.writelines(line + "\n" for line in views.table(table, "    "))
        if len(groups) > ROWS:
            out.write(f"    and {len(groups) - ROWS} more\n")
    if len(summaries) > POOLS:
        out.write(f"  and {len(summaries) - POOLS} more NodePools\n")
    if d.held:
        out.write(f"\n{held_line(d.held)}\n")


def _text_cells(d: diff.Diff, out: TextIO) -> None:
    if d.resources:
        out.write("\nCapacity and allocatable\n")
        table = [["NODEPOOL", "INSTANCE TYPE", "RESOURCE", "FIGURE", "BEFORE", "AFTER", "SET BY"]]
        table += [[r.pool, r.instance_type, r.resource, r.figure, r.before or "-", r.after or "-",
                   set_by(r.before_overlay, r.after_overlay)] for r in d.resources[:ROWS * 5]]
        out.writelines(line + "\n" for line in views.table(table, "  "))
        if len(d.resources) > ROWS * 5:
            out.write(f"  and {len(d.resources) - ROWS * 5} more\n")
    if d.templates:
        out.write("\nResourceSliceTemplates\n")
        table = [["NODEPOOL", "INSTANCE TYPE", "DRIVER", "SET BY"]]
        table += [[t.pool, t.instance_type, t.driver, set_by(t.before_overlay, t.after_overlay)]
                  for t in d.templates[:ROWS * 5]]
        out.writelines(line + "\n" for line in views.table(table, "  "))


def _text_overlays(d: diff.Diff, out: TextIO) -> None:
    if not d.overlays:
        out.write(f"\nOverlays: none changed ({d.unchanged} unchanged)\n")
        return
    out.write(f"\nOverlays ({len(d.overlays)} changed or moved, {d.unchanged} unchanged)\n")
    table = [["CHANGE", "OVERLAY", "BEFORE", "AFTER", "EFFECT"]]
    for c in d.overlays[:OVERLAY_ROWS]:
        name = f"{c.renamed_from} -> {c.name}" if c.renamed_from else c.name
        change = "STOPS APPLYING" if c.stops_applying else c.change if c.change != diff.UNCHANGED else "status"
        table.append([change, name, _status(c.before), _status_long(c.after), effect_text(d.effect(c.name))])
    out.writelines(line + "\n" for line in views.table(table, "  "))
    if len(d.overlays) > OVERLAY_ROWS:
        out.write(f"  and {len(d.overlays) - OVERLAY_ROWS} more\n")


def _text_nodepools(d: diff.Diff, out: TextIO) -> None:
    for what, names in (("added", d.nodepools_added), ("removed", d.nodepools_removed),
                        ("changed", d.nodepools_changed)):
        if names:
            out.write(f"NodePools {what}: {', '.join(names)}\n")


# --- JSON -------------------------------------------------------------------------------------------------

def _status_json(status: rp.Status | None) -> dict[str, str] | None:
    return None if status is None else {"status": status.state, "reason": status.reason}


def _finding_json(f: Finding, table: Table) -> dict[str, Any]:
    return formats.finding_json(f, table.locate(f))


def to_json(page: Page) -> dict[str, Any]:
    d = page.diff
    offerings, up, down = _offering_counts(d)
    return {
        "base": page.base,
        "head": page.head,
        "headline": headline(d),
        "summary": {
            "overlaysChanged": sum(1 for c in d.overlays if c.change != diff.UNCHANGED),
            "statusChanges": sum(1 for c in d.overlays if c.moved),
            "stopsApplying": sum(1 for c in d.overlays if c.stops_applying),
            "overlaysUnchanged": d.unchanged,
            "offeringsChanged": offerings,
            "dearer": up,
            "cheaper": down,
            # Changes only on cells no NodePool launches: not among the rows.
            "heldPrices": d.held.prices,
            "heldResources": d.held.resources,
            "heldTemplates": d.held.templates,
            "resourcesChanged": len(d.resources),
            "templatesChanged": len(d.templates),
            "findingsIntroduced": len(d.introduced),
            "errorsIntroduced": sum(1 for f in d.introduced if f.severity == Severity.ERROR),
            "findingsResolved": len(d.resolved),
        },
        "overlays": [{"name": c.name, "change": c.change, "renamedFrom": c.renamed_from,
                      "before": _status_json(c.before), "after": _status_json(c.after)} for c in d.overlays],
        "nodepools": {"added": list(d.nodepools_added), "removed": list(d.nodepools_removed),
                      "changed": list(d.nodepools_changed)},
        "pools": [{"nodepool": s.pool, "offerings": s.offerings, "resources": s.resources,
                   "medianPercent": s.median, "lowestPercent": s.lowest, "highestPercent": s.highest}
                  for s in d.pools],
        "prices": [{"nodepool": p.pool, "instanceType": p.instance_type, "zone": p.zone,
                    "capacityType": p.capacity_type, "before": p.before, "after": p.after, "percent": p.percent,
                    "beforeOverlay": p.before_overlay, "afterOverlay": p.after_overlay,
                    "presentBefore": p.present_before, "presentAfter": p.present_after, "estimated": p.estimated}
                   for p in d.prices[:JSON_ROWS]],
        "pricesOmitted": max(0, len(d.prices) - JSON_ROWS),
        "resources": [{"nodepool": r.pool, "instanceType": r.instance_type, "resource": r.resource,
                       "figure": r.figure, "before": r.before, "after": r.after, "beforeOverlay": r.before_overlay,
                       "afterOverlay": r.after_overlay} for r in d.resources[:JSON_ROWS]],
        "resourcesOmitted": max(0, len(d.resources) - JSON_ROWS),
        "resourceSliceTemplates": [{"nodepool": t.pool, "instanceType": t.instance_type, "driver": t.driver,
                                    "beforeOverlay": t.before_overlay, "afterOverlay": t.after_overlay}
                                   for t in d.templates[:JSON_ROWS]],
        "introduced": [_finding_json(f, page.table) for f in d.introduced],
        "resolved": [_finding_json(f, page.table) for f in d.resolved],
        "notes": list(page.notes),
    }


# --- Markdown ---------------------------------------------------------------------------------------------

def _md(value: object, longest: int = _CELL) -> str:
    """A table cell: no line break, no pipe, no HTML, bounded."""
    text = " ".join(str(value).split()).replace("\\", "\\\\").replace("|", "\\|")
    text = text.replace("<", "&lt;").replace(">", "&gt;").replace("`", "'")
    return text if len(text) <= longest else text[:longest - 1] + "…"


def _md_price(value: float | None, estimated: bool) -> str:
    return "-" if value is None else f"${views.price(value, estimated)}"


def _changes(d: diff.Diff) -> int:
    return 0 if d.empty else len(d.overlays) + len(d.prices) + len(d.resources) + len(d.templates) \
        + len(d.introduced) + len(d.resolved) + len(d.nodepools_added) + len(d.nodepools_removed) \
        + len(d.nodepools_changed)


def markdown(page: Page, limit: int = COMMENT_LIMIT) -> str:
    d = page.diff
    head = (f"{MARKER} changes={_changes(d)} -->\n### overlay-lint diff: {_md(headline(d))}\n\n"
            f"`{_md(page.base)}` → `{_md(page.head)}`\n")
    return _fit(head, _md_blocks(page), limit)


def _md_blocks(page: Page) -> list[str]:
    d = page.diff
    blocks = [*_md_overlays(d), *_md_nodepools(d), *_md_prices(d), *_md_resources(d), *_md_findings(page)]
    if page.notes:
        blocks.append(_notes(page.notes))
    return blocks


def _notes(notes: Sequence[str]) -> str:
    return _details(f"Notes ({len(notes)})", "\n".join(f"- {_md(n)}" for n in notes))


def _fit(head: str, blocks: list[str], limit: int) -> str:
    """Whole blocks; past `limit`, those in the middle are left out, one at a time, and counted."""
    kept = list(range(len(blocks)))
    text = "\n".join([head, *blocks])
    while len(text) > limit and kept:
        kept.pop(len(kept) // 2)
        first_gap = next((i for i, b in enumerate(kept) if b != i), len(kept))
        omitted = len(blocks) - len(kept)
        note = (f"*… {omitted} section{'s' if omitted != 1 else ''} left out to stay within GitHub's "
                f"{limit:,}-character comment limit; `overlay-lint diff` shows the whole …*\n")
        parts = [blocks[i] for i in kept]
        text = "\n".join([head, *parts[:first_gap], note, *parts[first_gap:]])
    return text if len(text) <= limit else head[:limit]


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>\n"


def _md_overlays(d: diff.Diff) -> list[str]:
    stops = [c for c in d.overlays if c.stops_applying]
    out = []
    if stops:
        out.append("\n".join(f"> [!WARNING]\n> **{_md(c.name)}**: {_md(c.before.state if c.before else '-')} → "
                             f"**{_md(_status_long(c.after))}**" for c in stops) + "\n")
    if not d.overlays:
        out.append(f"No overlay changes ({d.unchanged} unchanged).\n")
        return out
    rows = ["| Overlay | Change | Before | After | Effect |", "|---|---|---|---|---|"]
    for c in d.overlays[:OVERLAY_ROWS]:
        name = f"{_md(c.renamed_from)} → {_md(c.name)}" if c.renamed_from else _md(c.name)
        change = "status" if c.change == diff.UNCHANGED else c.change
        rows.append(f"| `{name}` | {change} | {_md(_status(c.before))} | {_md(_status_long(c.after))} | "
                    f"{_md(effect_text(d.effect(c.name)))} |")
    more = f"\n*and {len(d.overlays) - OVERLAY_ROWS} more*" if len(d.overlays) > OVERLAY_ROWS else ""
    out.append("\n".join(rows) + more + f"\n\n{_plural(d.unchanged, 'overlay')} unchanged.\n")
    return out


def _md_nodepools(d: diff.Diff) -> list[str]:
    lines = [f"- NodePools {what}: {', '.join(f'`{_md(n)}`' for n in names)}"
             for what, names in (("added", d.nodepools_added), ("removed", d.nodepools_removed),
                                 ("changed", d.nodepools_changed)) if names]
    return ["\n".join(lines) + "\n"] if lines else []


def _md_prices(d: diff.Diff) -> list[str]:
    prices = _by_pool(d)
    out = []
    summaries = [s for s in d.pools if s.offerings]
    for s in summaries[:POOLS]:
        rows = prices[s.pool]
        groups = folded(rows)
        lines = [f"#### NodePool `{_md(s.pool)}`: {_md(pool_line(s))}", "",
                 "| Instance type | Offering | Before | After | Change | Set by |", "|---|---|--:|--:|--:|---|"]
        lines += [f"| {_md(f.first.instance_type)} | {_md(f.where)} | {_md_price(f.first.before, f.first.estimated)} | "
                  f"{_md_price(f.first.after, f.first.estimated)} | {_md(change_text(f.first))} | "
                  f"{_md(set_by(f.first.before_overlay, f.first.after_overlay, '→'))} |" for f in groups[:ROWS]]
        if len(groups) > ROWS:
            lines.append(f"\n*and {len(groups) - ROWS} more*")
        out.append("\n".join(lines) + "\n")
    if len(summaries) > POOLS:
        out.append(f"*and {len(summaries) - POOLS} more NodePools with price changes*\n")
    if d.held:
        out.append(f"{_md(held_line(d.held), 4 * _CELL)}\n")
    return out


def _md_resources(d: diff.Diff) -> list[str]:
    out = []
    if d.resources:
        rows = ["| NodePool | Instance type | Resource | Figure | Before | After | Set by |",
                "|---|---|---|---|--:|--:|---|"]
        rows += [f"| {_md(r.pool)} | {_md(r.instance_type)} | {_md(r.resource)} | {r.figure} | "
                 f"{_md(r.before or '-')} | {_md(r.after or '-')} | "
                 f"{_md(set_by(r.before_overlay, r.after_overlay, '→'))} |"
                 for r in d.resources[:ROWS * 5]]
        more = f"\n*and {len(d.resources) - ROWS * 5} more*" if len(d.resources) > ROWS * 5 else ""
        out.append(_details(f"Capacity and allocatable ({len(d.resources)} changes)", "\n".join(rows) + more))
    if d.templates:
        rows = ["| NodePool | Instance type | Driver | Set by |", "|---|---|---|---|"]
        rows += [f"| {_md(t.pool)} | {_md(t.instance_type)} | {_md(t.driver)} | "
                 f"{_md(set_by(t.before_overlay, t.after_overlay, '→'))} |" for t in d.templates[:ROWS * 5]]
        out.append(_details(f"ResourceSliceTemplates ({len(d.templates)} changes)", "\n".join(rows)))
    return out


def _md_findings(page: Page) -> list[str]:
    out = []
    for title, found in (("introduced", page.diff.introduced), ("resolved", page.diff.resolved)):
        if not found:
            continue
        lines = [f"- **{f.severity}** `{f.code}` {_md(f.obj)}: {_md(f.message, 4 * _CELL)} "
                 f"({_md(formats.where(f, page.table.locate(f)))})" for f in found[:OVERLAY_ROWS]]
        if len(found) > OVERLAY_ROWS:
            lines.append(f"- *and {len(found) - OVERLAY_ROWS} more*")
        errors = sum(1 for f in found if f.severity == Severity.ERROR)
        out.append(_details(f"Findings {title}: {len(found)} ({_plural(errors, 'error')})", "\n".join(lines)))
    return out


# --- a fleet: one section per cluster the change touches ------------------------------------------------------

def write_fleet_text(fleet: FleetPage, out: TextIO) -> None:
    out.write(f"overlay-lint diff {fleet.base} -> {fleet.head}\n{_fleet_headline(fleet)}\n")
    if fleet.unchanged:
        out.write(f"unchanged: {', '.join(fleet.unchanged)}\n")
    for c in fleet.clusters:
        out.write(f"\n[{_cluster_title(c)}] {headline(c.page.diff)}\n")
        body = io.StringIO()
        write_text(c.page, body)
        # The first two lines are the sides and the headline, said above.
        out.writelines(f"[{c.cluster}] {line}\n" if line else "\n" for line in body.getvalue().splitlines()[2:])


def fleet_json(fleet: FleetPage) -> dict[str, Any]:
    return {"base": fleet.base, "head": fleet.head, "headline": _fleet_headline(fleet),
            "clusters": [{"cluster": c.cluster, "change": c.change, "diff": to_json(c.page)}
                         for c in fleet.clusters],
            "unchanged": list(fleet.unchanged), "notes": list(fleet.notes)}


def fleet_markdown(fleet: FleetPage, limit: int = COMMENT_LIMIT) -> str:
    changes = sum(_changes(c.page.diff) or 1 for c in fleet.clusters)
    head = (f"{MARKER} changes={changes} -->\n### overlay-lint diff: {_md(_fleet_headline(fleet))}\n\n"
            f"`{_md(fleet.base)}` → `{_md(fleet.head)}`\n")
    if fleet.unchanged:
        head += f"\nUnchanged: {', '.join(f'`{_md(n)}`' for n in fleet.unchanged)}\n"
    blocks = [_notes(fleet.notes)] if fleet.notes else []
    for c in fleet.clusters:
        blocks.append(f"## Cluster `{_md(_cluster_title(c))}`: {_md(headline(c.page.diff))}\n")
        blocks += _md_blocks(c.page)
    return _fit(head, blocks, limit)
