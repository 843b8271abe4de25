"""Fix hints: for every error finding, the change that makes the overlay do what was intended.

A same-weight conflict gets a concrete weight that keeps today's winner above the other (within
1..10000 and, where possible, not equal to a third overlay's weight on the same cells), or a
requirement that makes the two disjoint. Object errors get the edit to the field they point at.
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import functools
import json
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from simulation import findings
from simulation.semantics import cellset, clash, merge, model
from simulation.semantics import requirements as reqs
from simulation.validation import crds, legacy

MIN_WEIGHT, MAX_WEIGHT = 1, 10000
MAX_REQUIREMENTS = 100
# A price hint echoes the number only while it is one a person could mean (not 1e308 written out).
PRICE_DIGITS = 12
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
CAPACITY_TYPES = ("on-demand", "spot", "reserved")
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]+")
# How json writes a string (its default, ensure_ascii): the disjoint requirement is written by hand around it.
_STRING = json.encoder.encode_basestring_ascii


# --- conflicts ------------------------------------------------------------------------------------

class Taken:
    """The overlays by weight: a weight is free for an overlay when no other overlay of that
    weight sets one of its fields on one of its cells. The first weights tried are looked at one by one,
    so a near free weight costs a few overlays' cells; past them, the weights of every overlay meeting the
    one placed are read from the index's crowd at once, so a far one costs a few mask steps, not a walk."""

    def __init__(self, entries: Iterable[merge.Entry], gone: frozenset[str] = frozenset(),
                 stored: Mapping[int, Sequence[merge.Entry]] | None = None,
                 unions: dict[int, _Crowd] | None = None, crowd: merge.Crowd | None = None) -> None:
        by_weight: dict[int, list[merge.Entry]] = {}
        for e in entries:
            by_weight.setdefault(e.overlay.weight, []).append(e)
        self._stored: Mapping[int, Sequence[merge.Entry]] = by_weight if stored is None else stored
        self._fresh: Mapping[int, Sequence[merge.Entry]] = {} if stored is None else by_weight
        self._gone = gone
        # The stored overlays of a crowded weight as one union per field, made on a weight's first test and
        # shared with every Taken made from this one (they hold the same stored overlays): walking past a
        # crowded weight costs a few set tests, not one clash.meets per overlay there, so the hints of many
        # conflicts among crowded weights (sliding windows of families) stay linear.
        self._unions: dict[int, _Crowd] = {} if unions is None else unions
        # The stored overlays less `gone` as the index holds them: a walk past _WALK weights reads the weights of
        # all the overlays meeting the one placed at once (_Runs), so a ladder of 10,000 weights held by overlays
        # on common cells costs a few mask steps and a binary search, not 10,000 clash.meets.
        self._crowd = crowd
        # An overlay's fields and cells (all that clash.meets reads of it) -> the weights they meet: the
        # conflicts of one report are mostly among alike overlays.
        self._runs: dict[tuple[tuple[merge.Field, cellset.Cells], ...], _Runs] = {}
        # Walks of overlays that set equal fields on equal cells, while no overlay is left out or added: a weight
        # collides for all of them or for none (a walk never reaches its own overlay's weight, the only one where
        # their names differ), so each weight is tested once per such group and direction, and a walk that reaches
        # a weight passed before ends there. (fields, step) -> {weight passed or found: the free weight found}.
        # Not one memory with _runs: _runs bounds a walk at _WALK tests, but the sliding windows' hints grow faster
        # than the overlays (800 walks at 2,500, 20,000 at 10,000), and without this memory their walks test
        # 294,400 weights at 10,000 instead of 34,570: readiness 3.06 -> 3.76 s CPU, exponent 0.97 -> 1.14
        # (docs/design.md §6.1).
        self._walks: dict[tuple[frozenset[tuple[merge.Field, cellset.Cells]], int], dict[int, int | None]] = {}

    def changed(self, fresh: Iterable[merge.Entry], gone: Iterable[str], crowd: merge.Crowd | None = None) -> Taken:
        """These overlays with `gone` left out and `fresh` added; the index itself is shared, so a
        snapshot builds it once and each request pays for its own changes only. `crowd`: the stored overlays
        less `gone` (index.crowd), where one is kept."""
        return Taken(fresh, frozenset(gone), self._stored, self._unions, crowd)

    def warm(self) -> None:
        """Make every crowded weight's unions now (a snapshot's warm-up), not on the first hint that walks past."""
        for weight, stored in self._stored.items():
            if len(stored) > _FEW and weight not in self._unions:
                self._unions[weight] = _Crowd(stored)

    def _at(self, weight: int) -> Iterator[merge.Entry]:
        yield from (e for e in self._stored.get(weight, ()) if e.name not in self._gone)
        yield from self._fresh.get(weight, ())

    def _holder(self, e: merge.Entry, weight: int, valid: Callable[[str], bool] | None = None) -> merge.Entry | None:
        """The first other overlay at `weight` that sets one of `e`'s fields on one of its cells (of those whose
        name `valid` accepts, where given)."""
        # Read straight from the stored list where nothing is left out or added (a walk reads every overlay there).
        others = self._stored.get(weight, ()) if not self._gone and not self._fresh else self._at(weight)
        return next((other for other in others
                     if other.name != e.name and clash.meets(e, other) and (valid is None or valid(other.name))),
                    None)

    def _collides(self, e: merge.Entry, weight: int) -> bool:
        # Most weights a hint tries hold no overlay at all (the maps keep no empty lists).
        if weight not in self._stored and weight not in self._fresh:
            return False
        stored = self._stored.get(weight, ())
        if len(stored) <= _FEW:
            return self._holder(e, weight) is not None
        crowd = self._unions.get(weight)
        if crowd is None:
            crowd = self._unions[weight] = _Crowd(stored)
        # The union answers for the stored overlays only while none of them is left out or is `e` itself.
        if e.name in crowd.names or any(name in crowd.names for name in self._gone):
            return self._holder(e, weight) is not None
        return crowd.meets(e) or any(other.name != e.name and clash.meets(e, other)
                                     for other in self._fresh.get(weight, ()))

    def holders(self, e: merge.Entry, start: int, step: int, valid: Callable[[str], bool] | None = None) \
            -> Iterator[merge.Entry]:
        """The overlay holding each weight that `free(e, start, step)` passes, in its order: at each weight from
        `start` on by `step`, the first other overlay there that sets one of `e`'s fields on one of its cells; the
        walk ends at the first weight none holds (the free one) or at the API's bounds. `valid(name)`: whether an
        overlay counts (asked of those meeting `e` only), for a caller whose overlays are not all valid yet
        (analysis/needed.py); the holders of valid ones are those of a Taken of the valid ones alone."""
        weight = start
        while MIN_WEIGHT <= weight <= MAX_WEIGHT:
            holder = self._holder(e, weight, valid)
            if holder is None:
                return
            yield holder
            weight += step

    def free(self, e: merge.Entry, start: int, step: int) -> int | None:
        """The first weight from `start` on, by `step`, where no other overlay sets one of `e`'s fields on one of
        its cells (`e`'s own weight is never reached); None past the API's bounds. The weight after those
        `holders(e, start, step)` names, found without naming them: from memory, a crowd's unions, or its runs."""
        shared = not self._gone and not self._fresh
        passed = self._walks.setdefault((frozenset(e.fields().items()), step), {}) if shared else {}
        weight, visited, found = start, [], None
        while MIN_WEIGHT <= weight <= MAX_WEIGHT:
            if weight in passed:
                found = passed[weight]
                break
            if self._crowd is not None and abs(weight - start) == _WALK:
                found = self._held(e).free(e.name, weight, step)
                break
            visited.append(weight)
            if not self._collides(e, weight):
                found = weight
                break
            weight += step
        if shared:
            passed.update(dict.fromkeys(visited, found))
        return found

    def _held(self, e: merge.Entry) -> _Runs:
        """The weights of the overlays meeting `e` (clash.meets): the crowd's in a few mask steps per field, the
        fresh ones one by one."""
        key = tuple(e.fields().items())
        runs = self._runs.get(key)
        if runs is None:
            assert self._crowd is not None
            crowd = self._crowd
            fresh = (other for added in self._fresh.values() for other in added if clash.meets(e, other))
            runs = self._runs[key] = _Runs([*crowd.entries(clash.met_at_any_weight(crowd, e)), *fresh])
        return runs


# Up to this many stored overlays at a weight are tested one by one: a union costs more to build than they do.
_FEW = 8
# Weights walked one by one before the rest are read from the crowd at once: most free weights are near, and
# asking the crowd costs a mask step per overlay setting the field.
_WALK = 16


class _Runs:
    """The weights held by overlays meeting one overlay's cells, sorted: the nearest free weight either way is the
    end of the run of consecutive held weights `start` is in, found by binary search (in a run, each weight less
    its place is the same). Made in C-level steps: a ladder puts 10,000 weights here."""

    def __init__(self, holders: Sequence[merge.Entry]) -> None:
        weights: list[int] = list(map(_WEIGHT, holders))
        names: list[str] = list(map(_NAME, holders))
        # Every holder's weight, and each held weight once, ascending (the crowd gives them in Karpenter's order,
        # weight descending: one pass of timsort).
        self._all = sorted(weights)
        self._weights = sorted(set(weights))
        self._at = dict(zip(names, weights, strict=True))
        # The few names held twice (a stored overlay and a request's fresh one of the same name).
        self._twice: dict[str, list[int]] = {}
        if len(self._at) < len(names):
            for name, weight in zip(names, weights, strict=True):
                self._twice.setdefault(name, []).append(weight)

    def free(self, name: str, start: int, step: int) -> int | None:
        """Taken.free for the overlay `name`, from `start`."""
        weights = self._weights
        i = bisect.bisect_left(weights, start)
        end = start if i == len(weights) or weights[i] != start else self._past_run(i, step)
        # A weight held by `name` alone is free for it.
        mine = self._twice.get(name) or ([self._at[name]] if name in self._at else [])
        own = [w for w in mine
               if (start <= w < end if step > 0 else end < w <= start) and self._count(w) == mine.count(w)]
        if own:
            end = min(own) if step > 0 else max(own)
        return end if MIN_WEIGHT <= end <= MAX_WEIGHT else None

    def _past_run(self, i: int, step: int) -> int:
        """The weight past the run of held weights around place `i`, by `step`."""
        weights = self._weights
        offset = weights[i] - i
        lo, hi = (i, len(weights) - 1) if step > 0 else (0, i)
        # Up: the last place still in the run; down: the first.
        while lo < hi:
            if step > 0:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if weights[mid] - mid == offset else (lo, mid - 1)
            else:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if weights[mid] - mid == offset else (mid + 1, hi)
        return weights[lo] + step

    def _count(self, weight: int) -> int:
        return bisect.bisect_right(self._all, weight) - bisect.bisect_left(self._all, weight)


_WEIGHT = operator.attrgetter("weight")
_NAME = operator.attrgetter("name")


class _Crowd:
    """The overlays stored at one weight: their names, and per field the union of the cells they set it on.
    `meets(e)` is clash.meets(e, any of them)."""

    def __init__(self, entries: Sequence[merge.Entry]) -> None:
        self.names = frozenset(e.name for e in entries)
        self._fields: dict[merge.Field, cellset.Dense] = {}
        for e in entries:
            for field, cells in e.fields().items():
                union = self._fields.get(field)
                if union is None:
                    union = self._fields[field] = cellset.Dense(cells.block)
                union.add(cells)

    def meets(self, e: merge.Entry) -> bool:
        fields = self._fields
        return any(field in fields and fields[field].intersects(cells) for field, cells in e.fields().items())


@dataclasses.dataclass(frozen=True)
class Hint:
    text: str
    detail: Mapping[str, str]


class Seen:
    """What the hints of one report share, worked out once: each overlay's requirement keys as the disjoint
    test reads them, and the free weights found (a candidate meets up to clash.LIMIT partners per
    field)."""

    def __init__(self) -> None:
        self.keys: dict[str, set[str]] = {}
        # (overlay, first weight tried, step) -> the free weight found: a candidate that loses to each of its
        # partners is given the same lower weight for every one of them.
        self.weights: dict[tuple[str, int, int], int | None] = {}
        # (overlay, key, values) -> the NotIn requirement rendered (_not_in): alike partners of a candidate (one
        # instance family each) are split from it by the same requirement.
        self.rendered: dict[tuple[str, str, tuple[str, ...]], tuple[str, str]] = {}

    def free(self, taken: Taken, e: merge.Entry, start: int, step: int) -> int | None:
        """taken.free(e, start, step), worked out once per report (one report reads one Taken)."""
        key = (e.name, start, step)
        if key not in self.weights:
            self.weights[key] = taken.free(e, start, step)
        return self.weights[key]

    def not_in(self, split: tuple[str, str, tuple[str, ...]]) -> tuple[str, str]:
        """_not_in(*split), rendered once per report."""
        found = self.rendered.get(split)
        if found is None:
            found = self.rendered[split] = _not_in(*split)
        return found

    def open_keys(self, o: model.Overlay) -> set[str]:
        """The overlay's requirement keys, normalized."""
        found = self.keys.get(o.name)
        if found is None:
            normalized = reqs.NORMALIZED_LABELS
            found = self.keys[o.name] = {normalized.get(r.key, r.key) for r in o.requirements}
        return found


def _disjoint(winner: model.Overlay, loser: model.Overlay, seen: Seen) -> tuple[str, str, tuple[str, ...]] | None:
    """(overlay to change, key, values it should exclude with NotIn) so that no cell matches both."""
    # The winner's In on a key the loser leaves open (the first such key by name; of a key given twice, its
    # last In): the loser excludes those values (NotIn also matches where the key is undefined, but the
    # winner's In needs it defined, so they never meet).
    normalized = reqs.NORMALIZED_LABELS
    for first, second in ((winner, loser), (loser, winner)):
        open_keys = seen.open_keys(second)
        closing: dict[str, tuple[str, ...]] = {}
        for r in first.requirements:
            if r.operator == reqs.IN and r.values:
                key = normalized.get(r.key, r.key)
                if key not in open_keys:
                    closing[key] = r.values
        if closing:
            key = min(closing)
            return second.name, key, closing[key]
    return None


def _not_in(target: str, key: str, values: tuple[str, ...]) -> tuple[str, str]:
    """The NotIn requirement on `key` for `target`, as JSON inline (", " and ": " separators) and as
    json.dumps(..., sort_keys=True) writes {"overlay": target, "requirement": requirement} (its keys are
    in order already, and those are its default separators): strings written as json writes them."""
    rendered = _not_in_requirement(key, values)
    return rendered, f'{{"overlay": {_STRING(target)}, "requirement": {rendered}}}'


# Kept per (key, values): the partners a candidate is told to part from are the same few overlays request after
# request, whatever the candidate's name.
@functools.lru_cache(maxsize=4096)
def _not_in_requirement(key: str, values: tuple[str, ...]) -> str:
    """`_not_in`'s requirement, as JSON inline."""
    unique = sorted(set(values))
    return f'{{"key": {_STRING(key)}, "operator": "NotIn", "values": [{", ".join(map(_STRING, unique))}]}}'


def _ahead(first: merge.Entry, second: merge.Entry, taken: Taken, seen: Seen) -> tuple[str, dict[str, str]]:
    """Weights that put `first` ahead of `second` without a tie: raise the one, or lower the other."""
    w = first.overlay.weight
    up = seen.free(taken, first, w + 1, 1)
    down = seen.free(taken, second, w - 1, -1)
    options, weights = [], {}
    if up is not None:
        options.append(f"set {first.name}'s spec.weight to {up}")
        weights["raise"] = f"{first.name}={up}"
    if down is not None:
        options.append(f"{'or ' if options else 'set '}{second.name}'s spec.weight to {down}")
        weights["lower"] = f"{second.name}={down}"
    return f"{' ('.join(options)}{')' if len(options) > 1 else ''}", weights


def conflict(winner: merge.Entry, loser: merge.Entry, taken: Taken, seen: Seen | None = None) -> Hint:
    """Weights that keep `winner` (today's value on the shared cells) in effect without a tie, those that put the
    other ahead instead (which one was meant is the user's to say), and requirements that part them."""
    seen = seen or Seen()
    keep, kept = _ahead(winner, loser, taken, seen)
    swap, swapped = _ahead(loser, winner, taken, seen)
    detail: dict[str, str] = {}
    for option, weights in (("Weight", kept), ("OtherWeight", swapped)):
        for direction, value in weights.items():
            detail[f"{direction}{option}"] = value
    options = bool(keep or swap)
    parts = [f"to keep {winner.name} in effect, {keep}"] if keep else []
    parts += [f"to put {loser.name} in effect instead, {swap}"] if swap else []
    text = "; ".join(parts)
    split = _disjoint(winner.overlay, loser.overlay, seen)
    if split is not None:
        target = split[0]
        rendered, detail["disjoint"] = seen.not_in(split)
        text += f"{'; or ' if text else ''}make them disjoint: add {rendered} to {target}'s spec.requirements"
    elif not options:
        text = f"give {winner.name} and {loser.name} different weights, or requirements that select different cells"
    return Hint(text, detail)


# --- hugepages ------------------------------------------------------------------------------------

def hugepages(resource: str, instance_type: str, memory: str, pages: str) -> str:
    """For hugepages that take a type's memory: shrink them, or keep the overlay off such types."""
    return (f"lower spec.capacity.{resource} (the hugepages in effect total {pages} against {memory} of memory on "
            f"{instance_type}), or add a requirement that keeps the overlay off {instance_type} and types as small")


# --- object errors ----------------------------------------------------------------------------------

def _closest(value: Any, choices: Sequence[str]) -> str:
    text = str(value)
    folded = {c.lower(): c for c in choices}
    if text.lower() in folded:
        return folded[text.lower()]
    # A word around a valid one ("Within", "NotEquals") most likely meant the valid one.
    inside = [c for c in sorted(choices, key=len, reverse=True) if c.lower() in text.lower()]
    if inside:
        return inside[0]
    near = difflib.get_close_matches(text, choices, n=1, cutoff=0.0)
    return near[0] if near else choices[0]


def _label_value(value: Any) -> str:
    text = _LABEL_VALUE.sub("-", str(value)).strip("-_.")[:63].strip("-_.")
    return text or "value"


def _decimal_text(value: Any) -> str | None:
    try:
        number = Decimal(str(value).strip().lstrip("$"))
    except InvalidOperation:
        return None
    if not number.is_finite() or number < 0:
        return None
    return format(number.normalize(), "f")


def _price_adjustments(value: Any) -> list[tuple[str, str]]:
    """The fixes of a priceAdjustment: without a sign, a discount and a surcharge were as likely meant."""
    text = str(value).strip().replace(" ", "")
    match = re.fullmatch(r"([+-]?)(\d+(?:\.\d+)?)(%?)", text)
    if match is None:
        return [("-10%", "")]
    sign, number, percent = match.groups()
    if sign == "-" and percent and Decimal(number) > 100:
        return [("-100%", "")]
    if not sign:
        return [(f"-{number}{percent}", "discount"), (f"+{number}{percent}", "surcharge")]
    return [(f"{sign}{number}{percent}", "")]


def _requirement_hint(path: tuple[str | int, ...], raw: Any) -> str | None:
    req = crds.dig(raw, *path[:3])
    if not isinstance(req, dict):
        return None
    part = path[3] if len(path) > 3 else None
    operator, key, values = req.get("operator"), req.get("key"), req.get("values")
    if part == "operator":
        return f"set operator to {_closest(operator, OPERATORS)} (one of {', '.join(OPERATORS)})"
    if part == "key":
        if isinstance(key, str) and (key.split("/")[0].endswith("karpenter.sh") or key == "kubernetes.io/hostname"):
            return (f"select on a label outside the karpenter.sh domain ({reqs.CAPACITY_TYPE} and "
                    f"{reqs.NODEPOOL} are allowed), not {key}")
        return "use a qualified label key: an optional DNS prefix and '/', then at most 63 of [A-Za-z0-9-_.]"
    if key == reqs.CAPACITY_TYPE and operator == reqs.IN:
        return f"list at least one of {', '.join(CAPACITY_TYPES)} in values"
    if operator in ("Gt", "Lt", "Gte", "Lte"):
        number = re.sub(r"\D", "", str(values[0])) if isinstance(values, list) and values else ""
        return f"give exactly one non-negative integer in values, e.g. [\"{number or '0'}\"]"
    if operator in (reqs.IN, reqs.NOT_IN) and not values:
        return f"add at least one value, or use {reqs.EXISTS if operator == reqs.IN else reqs.DOES_NOT_EXIST}"
    if len(path) > 4 and part == "values":
        return _value_hint(crds.dig(raw, *path))
    return None


def _value_hint(value: Any) -> str:
    """The fix for one value of a requirement."""
    if isinstance(value, bool):
        # kubectl reads YAML 1.1: an unquoted on/off/yes/no/true/false arrives as a boolean.
        return "quote the value as written: YAML reads an unquoted on, off, yes, no, true or false as a boolean"
    if isinstance(value, int | float):
        return f"quote the value: \"{value}\" (unquoted, YAML reads it as a number)"
    return f"write the value as a label value (at most 63 of [A-Za-z0-9-_.]), e.g. \"{_label_value(value)}\""


def _requirements_hint(value: Any) -> str | None:
    """For spec.requirements itself: missing, not a list, or too long."""
    if value is None:
        return "add spec.requirements: a list of {key, operator, values}; [] selects every instance type"
    if not isinstance(value, list):
        return "write spec.requirements as a list of {key, operator, values} (a YAML sequence, `- key: ...`)"
    if len(value) > MAX_REQUIREMENTS:
        return f"at most {MAX_REQUIREMENTS} requirements: split the overlay in two"
    return None


def _spec_hint(path: tuple[str | int, ...], raw: Any) -> str | None:
    field = path[1] if len(path) > 1 else None
    value = crds.dig(raw, *path)
    if field == "requirements":
        return _requirement_hint(path, raw) if len(path) > 2 else _requirements_hint(value)
    if field == "weight" and len(path) == 2:
        number = _decimal_text(value)
        bounded = min(max(int(Decimal(number)), MIN_WEIGHT), MAX_WEIGHT) if number else MIN_WEIGHT
        return f"set spec.weight to an integer in {MIN_WEIGHT}..{MAX_WEIGHT}, e.g. {bounded}"
    spec = crds.dig(raw, "spec")
    if len(path) == 1 and isinstance(spec, dict) and "price" in spec and "priceAdjustment" in spec:
        return "keep only one of spec.price and spec.priceAdjustment"
    if field == "price" and len(path) == 2:
        number = _decimal_text(value)
        plausible = number is not None and len(number) <= PRICE_DIGITS
        return f"write spec.price as a decimal string (USD per hour), e.g. \"{number if plausible else '0.5'}\""
    if field == "priceAdjustment" and len(path) == 2:
        examples = " or ".join(f"\"{e}\"{f' for a {meant}' if meant else ''}" for e, meant in _price_adjustments(value))
        return f"write spec.priceAdjustment as +N, -N, +N% or -N% (N < 100, or exactly -100%), e.g. {examples}"
    if field == "capacity" and len(path) == 3:
        name = str(path[2])
        if name in ("cpu", "memory", "ephemeral-storage", "pods"):
            return f"remove spec.capacity.{name}: overlays add extended resources only (e.g. example.com/device)"
        return f"write spec.capacity.{name} as a Kubernetes quantity, e.g. \"1\" or \"10Gi\""
    return None


def _schema_hint(f: findings.Finding, raw: Any) -> str:
    path = f.path
    detail = dict(f.detail)
    if "unknown" in detail and path == crds.DRA_FIELD:
        return ("to use spec.dynamicResources, choose the DRA-extended NodeOverlay CRD: overlay-lint --crd dra; "
                "in a cluster, install the opt-in kustomize component manifests/components/dra-crd (Helm: "
                "draCRD.enabled=true); otherwise remove spec.dynamicResources")
    if "unknown" in detail:
        near = detail.get("didYouMean")
        return f"rename {f.field} to {near}" if near else f"remove {f.field}, which the CRD does not define"
    if path[:1] == ("spec",):
        specific = _spec_hint(path, raw)
        if specific:
            return specific
    if path == ("metadata", "name"):
        name = crds.dig(raw, *path)
        fixed = re.sub(r"[^a-z0-9.-]+", "-", str(name or "").lower()).strip("-.")[:253] or "my-overlay"
        return f"set metadata.name to a lowercase DNS subdomain, e.g. {fixed}"
    if "must be" in f.message and "not a boolean" in f.message:
        return f"quote the value of {f.field} (YAML reads on/off/yes/no as booleans)"
    return f"change {f.field or 'the object'} so that the API server accepts it"


def _dns_label(value: Any) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", str(value).lower()).strip("-")[:63].strip("-") or "key"


def _dra_hint(f: findings.Finding, raw: Any) -> str:
    value = crds.dig(raw, *f.path)
    if f.path[-1:] == ("bindingKey",) and isinstance(value, str) and _dns_label(value) != value:
        return f"rename the bindingKey to a DNS label, e.g. {_dns_label(value)}, wherever it is used in this overlay"
    if f.path[-1:] == ("driver",) and isinstance(value, str):
        fixed = re.sub(r"[^a-z0-9.-]+", "-", value.lower()).strip("-.") or "example.com"
        if fixed != value:
            return f"set the driver to a DNS subdomain, e.g. {fixed}"
    if f.code == "invalid-binding-key":
        return ("use one DNS-label bindingKey on at least two devices of this overlay, under one attribute name, "
                "at most once per device, with no concrete value in that attribute")
    if f.code == "invalid-attribute-binding":
        return ("give at least two deviceSelectors, each naming a template and a device of this overlay, and "
                "qualified attribute names whose bound devices agree on any concrete value")
    name = f.path[-1] if f.path else None
    if isinstance(name, str) and legacy.excluded_reason(f.path[:-1], name) is not None:
        return f"remove {f.field}: the DRA NodeOverlay RFC excludes it from templates"
    return f"fix {f.field}: a DNS-subdomain driver, unique template and device names, at most 128 devices"


def _legacy_hint(f: findings.Finding, raw: Any) -> str:
    del raw  # the finding's detail carries the migration
    replacement = dict(f.detail).get("replacement")
    name = f.path[-1] if f.path else "the field"
    if replacement is not None:
        return f"replace spec.{name} with {replacement}" if replacement != "{}" else f"remove spec.{name}"
    if name == "overhead":
        return "reserve it in the NodeClass (kubelet systemReserved/kubeReserved), then remove spec.overhead"
    return f"remove spec.{name} and express it with requirements, price/priceAdjustment or capacity"


def _runtime_hint(f: findings.Finding, raw: Any) -> str:
    if f.path[:2] == ("spec", "capacity") and len(f.path) == 3:
        return f"remove {f.field}: overlays add extended resources only"
    return (_requirement_hint(f.path, raw) if f.path[:2] == ("spec", "requirements") else None) or (
        f"change {f.field} so that Karpenter's runtime validation accepts it")


def _parse_hint(f: findings.Finding, raw: Any) -> str:
    del raw  # there is no object: it did not parse
    if "boolean" in f.message:
        return "quote the value (YAML 1.1 reads on/off/yes/no as booleans)"
    return "fix the YAML/JSON at this position so that it parses"


# code -> the hint for an error finding of that code
_BY_CODE: Mapping[str, Callable[[findings.Finding, Any], str]] = {
    "legacy-field": _legacy_hint,
    "schema": _schema_hint,
    "runtime-invalid": _runtime_hint,
    "duplicate-object": lambda f, raw: "rename one of the two copies (metadata.name) or delete one",
    "invalid-binding-key": _dra_hint,
    "invalid-attribute-binding": _dra_hint,
    "invalid-resource-slice-template": _dra_hint,
    "parse-error": _parse_hint,
    "unreadable-input": lambda f, raw: "make the path readable, or remove it from the input",
}


def for_finding(f: findings.Finding, raw: Any = None) -> str:
    """The fix for one error finding about an object (`raw`: the object as written, when known)."""
    hint = _BY_CODE.get(f.code)
    return hint(f, raw) if hint is not None else ""


def attach(found: Iterable[findings.Finding], raw: Any = None) -> list[findings.Finding]:
    """`found` with a hint on every error that lacks one; `raw`: the object they are about, as written."""
    out = []
    for f in found:
        if f.severity == findings.Severity.ERROR and not f.hint:
            hint = for_finding(f, raw)
            f = dataclasses.replace(f, hint=hint) if hint else f
        out.append(f)
    return out
