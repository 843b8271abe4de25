"""Semantic checks of the NodeOverlay DRA extension (docs/design.md §4.6).

The schema layer owns structure (types, patterns, limits, required fields). Everything here
reads the overlay defensively: a value of the wrong shape is skipped without a finding, so a
structural mistake is reported once, by the schema layer, and never cascades into a semantic one.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simulation import findings

Path = tuple[str | int, ...]

_DR: Path = ("spec", "dynamicResources")
_VALUE_TYPES = ("string", "int", "bool", "version")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass(frozen=True)
class _Device:
    """One device of a ResourceSlice template, with its place in the overlay."""

    template: int
    index: int
    template_label: str
    label: str
    path: Path

    def describe(self) -> str:
        return f"template {self.template_label}, device {self.label}"


@dataclasses.dataclass(frozen=True)
class _Attr:
    """One attribute of a device: its name, its bindingKey, its value."""

    device: _Device
    name: str
    key: str | None
    # (type, comparable value) when exactly one well-typed concrete value is given.
    value: tuple[str, Any] | None
    value_fields: tuple[str, ...]
    path: Path

    @property
    def node(self) -> tuple[int, int, str]:
        return (self.device.template, self.device.index, self.name)

    def describe(self) -> str:
        return f"{self.device.describe()}, attribute {self.name}"


@dataclasses.dataclass
class _Template:
    """One ResourceSlice template of an overlay, as far as its fields can be read."""

    index: int
    name: str | None
    # False when a malformed field hides a name: a reference to it cannot be judged.
    name_known: bool
    devices: dict[str, _Device]
    devices_known: bool


def _map(value: Any) -> Mapping[Any, Any] | None:
    return value if type(value) is dict or isinstance(value, Mapping) else None


def _seq(value: Any) -> Sequence[Any] | None:
    # A string is a Sequence too, but never a list in this API.
    return value if isinstance(value, Sequence) and not isinstance(value, str | bytes) else None


def _dynamic_resources(obj: Any) -> Mapping[Any, Any]:
    spec = _map(obj.get("spec")) if isinstance(obj, Mapping) else None
    return (_map(spec.get("dynamicResources")) if spec is not None else None) or {}


def _parse(obj: Any) -> tuple[list[_Template], list[_Attr], bool]:
    """Templates, attributes in document order, and whether the template list itself is readable."""
    raw = _dynamic_resources(obj).get("resourceSliceTemplates")
    entries = _seq(raw)
    out: list[_Template] = []
    attrs: list[_Attr] = []
    for ti, entry in enumerate(entries or ()):
        tpl = _map(entry)
        if tpl is None:
            out.append(_Template(ti, None, False, {}, False))
            continue
        meta = tpl.get("metadata") if tpl.get("metadata") is not None else {}
        name = meta.get("name") if isinstance(meta, Mapping) else None
        name_known = isinstance(meta, Mapping) and (name is None or isinstance(name, str))
        label = name if isinstance(name, str) else f"#{ti}"
        template = _Template(ti, name if isinstance(name, str) else None, name_known, {}, True)
        out.append(template)
        spec = _map(tpl.get("spec"))
        raw_devices = spec.get("devices") if spec is not None else None
        devices = () if spec is not None and raw_devices is None else _seq(raw_devices)
        template.devices_known = devices is not None
        for di, raw_device in enumerate(devices or ()):
            device = _map(raw_device)
            if device is None:
                template.devices_known = False
                continue
            dname = device.get("name")
            # Its attributes still count, so a partner device's key use is not left looking lonely.
            template.devices_known &= dname is None or isinstance(dname, str)
            path = (*_DR, "resourceSliceTemplates", ti, "spec", "devices", di)
            dev = _Device(ti, di, label, dname if isinstance(dname, str) else f"#{di}", path)
            if isinstance(dname, str):
                template.devices.setdefault(dname, dev)
            attrs.extend(_attributes(dev, device.get("attributes")))
    return out, attrs, raw is None or entries is not None


def _attributes(dev: _Device, raw: Any) -> list[_Attr]:
    out: list[_Attr] = []
    for name, spec in (_map(raw) or {}).items():
        if not isinstance(name, str) or not isinstance(spec, Mapping):
            continue
        key = spec.get("bindingKey")
        fields = tuple(t for t in _VALUE_TYPES if spec.get(t) is not None)
        value = _concrete(fields[0], spec[fields[0]]) if len(fields) == 1 else None
        path = (*dev.path, "attributes", name)
        out.append(_Attr(dev, name, key if isinstance(key, str) else None, value, fields, path))
    return out


def _concrete(kind: str, raw: Any) -> tuple[str, Any] | None:
    # Ill-typed values belong to the schema layer; bool is excluded from int on purpose.
    if kind in ("string", "version") and isinstance(raw, str):
        # Semantic versions that differ only in build metadata have equal precedence.
        return (kind, raw.split("+", 1)[0] if kind == "version" else raw)
    if kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
        return (kind, raw)
    if kind == "bool" and isinstance(raw, bool):
        return (kind, raw)
    return None


def _show(value: tuple[str, Any]) -> str:
    return f"{value[0]} {value[1]!r}"


def is_dns_label(text: str) -> bool:
    return len(text) <= 63 and _DNS_LABEL.fullmatch(text) is not None


def is_qualified_name(text: str) -> bool:
    """resource.k8s.io QualifiedName: a C identifier (≤32), optionally after `domain/` (DNS subdomain ≤63)."""
    domain, slash, ident = text.rpartition("/")
    if slash and not (0 < len(domain) <= 63 and _DNS_SUBDOMAIN.fullmatch(domain)):
        return False
    return 0 < len(ident) <= 32 and _C_IDENTIFIER.fullmatch(ident) is not None


def check_overlay(obj: Mapping[str, Any], ref: findings.ObjectRef,
                  source: int | None) -> list[findings.Finding]:
    """invalid-binding-key and invalid-attribute-binding findings for one overlay."""
    if not _dynamic_resources(obj):  # most overlays: nothing to parse, nothing to find
        return []
    templates_, attrs, templates_readable = _parse(obj)
    out = _binding_keys(attrs, ref, source)
    out.extend(_attribute_bindings(obj, templates_, attrs, templates_readable, ref, source))
    return out


def _binding_keys(attrs: Sequence[_Attr], ref: findings.ObjectRef,
                  source: int | None) -> list[findings.Finding]:
    uses: dict[str, list[_Attr]] = {}
    for attr in attrs:
        if attr.key is not None:
            uses.setdefault(attr.key, []).append(attr)
    return [findings.make("invalid-binding-key", ref, (*use.path, "bindingKey"),
                          f"NodeOverlay {ref.name}: bindingKey {key!r} ({use.describe()}) {why}", source=source)
            for key, group in uses.items() for use, why in _key_problems(key, group)]


def _key_problems(key: str, group: Sequence[_Attr]) -> list[tuple[_Attr, str]]:
    """What is wrong with the uses of one bindingKey, each with the use to point at."""
    first = group[0]
    out: list[tuple[_Attr, str]] = []
    if not is_dns_label(key):
        out.append((first, "is not a DNS label (lowercase alphanumerics and '-', at most 63 characters)"))
    # A key set beside a concrete value is the CRD's exactly-one-value rule (schema.py).
    if len({u.device for u in group}) < 2:
        # Karpenter v1.15's scheduler (BuildAttributeBindings) skips such a binding without a word.
        out.append((first, "appears on only one device; a key binds an attribute across at least two devices "
                           "(Karpenter silently ignores a binding of fewer than two devices)"))
    earlier, repeats = _first_uses(group)
    if repeats:
        prior = earlier[repeats[0].device]
        out.append((repeats[0], f"is already used on this device under attribute {prior.name}; "
                                "a device may use a key once"))
    # A repeat on one device always spans two attribute names; that use is reported above.
    stray = next((u for u in group if u.name != first.name and u not in repeats), None)
    if stray is not None:
        out.append((stray, f"is used under attribute {first.name} elsewhere ({first.device.describe()}); "
                           "all uses of a key must be under one attribute name (Karpenter would bind each name "
                           "apart and silently ignore one with a single device)"))
    return out


def _first_uses(group: Sequence[_Attr]) -> tuple[dict[_Device, _Attr], list[_Attr]]:
    """Each device's first use of a key, and the uses that repeat it on a device."""
    earlier: dict[_Device, _Attr] = {}
    repeats: list[_Attr] = []
    for use in group:
        if use.device in earlier:
            repeats.append(use)
        else:
            earlier[use.device] = use
    return earlier, repeats


_Node = tuple[int, int, str]
_Emit = Callable[[Path, str], None]


class _Components:
    """Union-find over (template, device, attribute) nodes: which attributes share one value."""

    def __init__(self) -> None:
        self._parent: dict[_Node, _Node] = {}

    def find(self, node: _Node) -> _Node:
        root = node
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while node != root:
            self._parent[node], node = root, self._parent.get(node, root)
        return root

    def union(self, a: _Node, b: _Node) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)


class _Selectors:
    """Resolves an attributeBinding's device selectors against the overlay's templates."""

    def __init__(self, templates_: Sequence[_Template], templates_readable: bool, emit: _Emit) -> None:
        self._by_name: dict[str, list[_Template]] = {}
        for tpl in templates_:
            if tpl.name is not None:
                self._by_name.setdefault(tpl.name, []).append(tpl)
        # With an unreadable entry somewhere, "no such template" could be a schema error in disguise.
        self._names_known = templates_readable and all(t.name_known for t in templates_)
        self._emit = emit

    def bound(self, bi: int, binding: Mapping[Any, Any]) -> list[_Device]:
        """The distinct devices binding `bi` selects; a selector that names nothing is reported."""
        out: list[_Device] = []
        for si, raw in enumerate(_seq(binding.get("deviceSelectors")) or ()):
            spath = (*_DR, "attributeBindings", bi, "deviceSelectors", si)
            dev = self._device(bi, _map(raw), spath)
            if dev is not None and dev in out:
                self._emit(spath, f"attributeBindings[{bi}] selects {dev.describe()} twice; a binding needs "
                                  "distinct devices")
            elif dev is not None:
                out.append(dev)
        return out

    def _device(self, bi: int, sel: Mapping[Any, Any] | None, spath: Path) -> _Device | None:
        tname = sel.get("resourceSliceTemplate") if sel is not None else None
        dname = sel.get("device") if sel is not None else None
        if not isinstance(tname, str) or not isinstance(dname, str):
            return None
        candidates = self._by_name.get(tname, [])
        if not candidates:
            if self._names_known:
                self._emit((*spath, "resourceSliceTemplate"),
                           f"attributeBindings[{bi}] selects template {tname}, which this overlay does not define")
            return None
        dev = next((t.devices[dname] for t in candidates if dname in t.devices), None)
        if dev is None and all(t.devices_known for t in candidates):
            self._emit((*spath, "device"), f"attributeBindings[{bi}] selects device {dname} of template {tname}, "
                                           "which the template does not define")
        return dev


def _attribute_bindings(obj: Any, templates_: Sequence[_Template], attrs: Sequence[_Attr],
                        templates_readable: bool, ref: findings.ObjectRef,
                        source: int | None) -> list[findings.Finding]:
    out: list[findings.Finding] = []

    def emit(path: Path, why: str) -> None:
        out.append(findings.make("invalid-attribute-binding", ref, path,
                                 f"NodeOverlay {ref.name}: {why}", source=source))

    selectors = _Selectors(templates_, templates_readable, emit)
    components = _Components()
    binders: list[tuple[int, _Node]] = []
    for bi, raw in enumerate(_seq(_dynamic_resources(obj).get("attributeBindings")) or ()):
        binding = _map(raw)
        if binding is None:
            continue
        # Whether the names are qualified names is the CRD's own rule (schema.py reports it).
        names = [n for n in _seq(binding.get("attributes")) or () if isinstance(n, str)]
        bound = selectors.bound(bi, binding)
        for name, dev in itertools.product(names, bound):
            node = (dev.template, dev.index, name)
            components.union((bound[0].template, bound[0].index, name), node)
            binders.append((bi, node))
    keyed: dict[str, _Node] = {}
    for attr in attrs:
        if attr.key is not None:
            components.union(keyed.setdefault(attr.key, attr.node), attr.node)
    _value_clashes(attrs, components, binders, emit)
    return out


def _value_clashes(attrs: Sequence[_Attr], components: _Components, binders: Sequence[tuple[int, _Node]],
                   emit: _Emit) -> None:
    """Bound attributes (by attributeBindings) that are given different concrete values: one report per set."""
    bindings_of: dict[_Node, set[int]] = {}
    for bi, node in binders:
        bindings_of.setdefault(components.find(node), set()).add(bi)
    seen: dict[_Node, tuple[_Attr, tuple[str, Any]]] = {}
    reported: set[_Node] = set()
    for attr in attrs:
        if attr.value is None or attr.key is not None:
            continue
        root = components.find(attr.node)
        first, value = seen.setdefault(root, (attr, attr.value))
        if value == attr.value or root in reported or root not in bindings_of:
            continue
        reported.add(root)
        via = ", ".join(f"attributeBindings[{i}]" for i in sorted(bindings_of[root]))
        emit((*attr.path, attr.value_fields[0]),
             f"attribute {attr.name} of {attr.device.describe()} ({_show(attr.value)}) is bound by {via} "
             f"to attribute {first.name} of {first.device.describe()} ({_show(value)}); bound devices "
             "share one value and must not give different concrete values")


def check_scope(overlays: Sequence[tuple[findings.ObjectRef, Mapping[str, Any], int | None]]
                ) -> list[findings.Finding]:
    """binding-key-scope: a bindingKey reused in another overlay binds nothing across them."""
    users: dict[str, dict[findings.ObjectRef, tuple[_Attr, int | None]]] = {}
    for ref, obj, source in overlays:
        for attr in _parse(obj)[1]:
            if attr.key is not None:
                users.setdefault(attr.key, {}).setdefault(ref, (attr, source))
    out: list[findings.Finding] = []
    for key in sorted(users):
        refs = sorted(users[key])
        for i, later in enumerate(refs):
            use, source = users[key][later]
            for other in refs[:i]:
                out.append(findings.make(
                    "binding-key-scope", later, (*use.path, "bindingKey"),
                    f"NodeOverlay {later.name}: bindingKey {key!r} ({use.describe()}) is also used by "
                    f"NodeOverlay {other.name}; a key binds only within its own overlay, so the two are "
                    "not bound to each other", related=(other,), source=source))
    return out


def templates(obj: Mapping[str, Any]) -> list[tuple[int, str, str]]:
    """(index, metadata.name or "", driver) of every template with a readable driver."""
    out: list[tuple[int, str, str]] = []
    for i, raw in enumerate(_seq(_dynamic_resources(obj).get("resourceSliceTemplates")) or ()):
        tpl = _map(raw)
        spec = _map(tpl.get("spec")) if tpl is not None else None
        driver = spec.get("driver") if spec is not None else None
        if tpl is None or not isinstance(driver, str) or not driver:
            continue
        meta = _map(tpl.get("metadata"))
        name = meta.get("name") if meta is not None else None
        out.append((i, name if isinstance(name, str) else "", driver))
    return out


# Shared by the overlays without bindingKeys (most): an empty frozenset is a new object, tracked by the collector.
_NO_KEYS: frozenset[str] = frozenset()


def binding_keys(obj: Mapping[str, Any]) -> frozenset[str]:
    """Every bindingKey an overlay uses (to find which other overlays share one)."""
    if not _dynamic_resources(obj):
        return _NO_KEYS
    return frozenset(a.key for a in _parse(obj)[1] if a.key is not None)
