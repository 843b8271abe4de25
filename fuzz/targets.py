"""The fuzz targets: each takes one input of bytes and raises only on a real defect (a
traceback, a 5xx, a wrong answer). Setting up is done once per process, outside the targets.

- `loader`: the bytes are one input file for `overlay-lint check`.
- `shapes`: seed documents with fields replaced by values of any type (the issue-13 crash
  class), written as YAML or JSON, for `overlay-lint check`.
- `admission`: an AdmissionReview body (raw bytes, or a well-formed review whose objects are
  mutated like `shapes`) POSTed to /validate or /mutate of the real aiohttp app in process.
- `core`: generated catalogs, NodePools and overlays evaluated by the core and by the plain
  port of Karpenter's loop in tests/reference.py (the property test's own generators).
- `fastyaml`: the bytes as a YAML file read by rapidyaml (`sources/fastyaml.py`) and by libyaml (`tree`): where
  the fast reader answers, the values (types included), typed plain scalars and positions are tree's.
- `quantity`: the quantity parser against `kubernetes.utils.parse_quantity` where the client
  is a faithful oracle, and its own canonical form round trip.
"""

from __future__ import annotations

import asyncio
import atexit
import decimal
import functools
import importlib.resources
import io
import json
import os
import re
import tempfile
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from fuzz import provider
from lint import cli
from simulation import findings
from simulation.semantics import quantity
from sources import fastyaml, tree

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "tests" / "lint_fixtures" / "catalog.yaml"
SEED_FILES = (*sorted((ROOT / "examples").glob("*.yaml")), CATALOG)
FORMATS = ("json", "text", "sarif", "github", "junit")


class Defect(AssertionError):
    """What a target found: libFuzzer saves the input and stops."""


# --- overlay-lint ---------------------------------------------------------------------------------

# Instance types the examples and fixtures name: a catalog small enough for thousands of runs a
# second, in the JSON format (reading YAML InstanceTypes on every run would be most of the work).
CATALOG_TYPES = ("m5.large", "m5.xlarge", "c5.large", "c7g.large", "g5.xlarge", "g6.xlarge", "p4d.24xlarge",
                 "p5.48xlarge", "r6i.large", "trn1.32xlarge")


@functools.cache
def small_catalog() -> str:
    from simulation.semantics import catalog as cat

    text = (importlib.resources.files("simulation") / "data" / cat.DEFAULT_DATA).read_text("utf-8")
    data = json.loads(text)
    data["instanceTypes"] = [t for t in data["instanceTypes"] if t["name"] in CATALOG_TYPES]
    handle, path = tempfile.mkstemp(prefix="overlay-guard-fuzz-", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    atexit.register(os.unlink, path)
    return path


def _check(data: bytes, fmt: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    # InstanceType documents in the input are the catalog; --catalog would contradict them.
    catalog = [] if b"InstanceType" in data else ["--catalog", small_catalog()]
    status = cli.main(["check", "-", "--format", fmt, *catalog], stdin=io.BytesIO(data), stdout=out, stderr=err)
    message = err.getvalue()
    if "internal error" in message or "Traceback" in message or "Traceback" in out.getvalue():
        raise Defect(message or out.getvalue()[:2000])
    if status == 2:
        # Only a one-line error may end a run over stdin (e.g. a catalog the input contradicts).
        if len(message.strip().splitlines()) != 1:
            raise Defect(f"exit 2 without a one-line error: {message!r}")
        return
    if status not in (0, 1):
        raise Defect(f"exit status {status}")
    if fmt == "json":
        result = json.loads(out.getvalue())
        for f in result["findings"]:
            if f["code"] not in findings.CODES:
                raise Defect(f"unknown code {f['code']!r}")
            if f["code"] == "parse-error" and f.get("line") is not None and f["line"] < 1:
                raise Defect(f"bad position {f}")
        errors = result["summary"]["errors"]
        if (status == 1) != (errors > 0):
            raise Defect(f"exit {status} with {errors} errors")


def loader(data: bytes) -> None:
    _check(data, FORMATS[len(data) % len(FORMATS)])
    _sendable(data)


def _sendable(data: bytes) -> None:
    """What the reader hands on is what kubectl could send: JSON without NaN or infinities, string keys."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    for parsed in tree.documents(text):
        if parsed.problem is None:
            try:
                json.dumps(parsed.value, allow_nan=False, skipkeys=False)
            except (TypeError, ValueError) as err:
                raise Defect(f"document {parsed.index} is not JSON kubectl could send: {err}") from None
            if any(not isinstance(k, str) for k in _keys(parsed.value)):
                raise Defect(f"document {parsed.index} has a key that is not a string")


def _keys(value: Any) -> Any:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield from item
            stack += item.values()
        elif isinstance(item, list):
            stack += item


@functools.cache
def seed_documents() -> tuple[Any, ...]:
    yaml = YAML(typ="safe", pure=True)
    docs: list[Any] = []
    for path in SEED_FILES:
        docs += [d for d in yaml.load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
    return tuple(docs)


def _yaml(docs: list[Any]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.allow_unicode = True
    buffer = io.StringIO()
    yaml.dump_all(docs, buffer)
    return buffer.getvalue()


def mutated_documents(source: provider.Bytes) -> list[Any]:
    seeds = seed_documents()
    docs = [seeds[source.below(len(seeds))] for _ in range(1 + source.below(4))]
    docs[0] = provider.mutate(docs[0], source)
    if source.below(4) == 0:
        docs = [{"apiVersion": "v1", "kind": source.pick(("List", "NodeOverlayList", "NodePoolList")),
                 "items": docs}]
    return docs


@functools.cache
def _seed_yaml(index: int) -> str:
    return _yaml([seed_documents()[index]])


def _yaml_stream(docs: list[Any]) -> str:
    """The documents as one YAML stream; a seed document that was not mutated (the same object)
    is written once per process, the writer being the costliest part of this harness."""
    seeds = {id(d): i for i, d in enumerate(seed_documents())}
    return "---\n".join(_seed_yaml(seeds[id(d)]) if id(d) in seeds else _yaml([d]) for d in docs)


def shapes(data: bytes) -> None:
    source = provider.Bytes(data)
    as_json = source.flag()
    docs = mutated_documents(source)
    # JSON is YAML; the YAML writer leaves 1.1 booleans such as `on` unquoted (it writes 1.2).
    text = "\n---\n".join(json.dumps(d) for d in docs) if as_json else _yaml_stream(docs)
    _check(text.encode("utf-8", "surrogatepass"), "json")


# --- the admission handler ------------------------------------------------------------------------

class _Webhook:
    """The real app (routing, body limits, parsing, the cache, the core) over plain HTTP."""

    def __init__(self) -> None:
        from aiohttp.test_utils import TestClient, TestServer

        from webhook import loader as state_loader
        from webhook.app import create_app
        from webhook.config import Config
        from webhook.state import Cache

        self.loop = asyncio.new_event_loop()
        catalog = state_loader.load_catalog(Path(small_catalog()))
        objects = state_loader.state_objects([ROOT / "tests" / "admission" / "state.yaml",
                                              ROOT / "examples"])

        async def start() -> TestClient[Any, Any]:
            cache = Cache(debounce=0.0, after=5.0)
            cache.set_catalog(catalog)
            cache.load(objects)
            await cache.start()
            if not await cache.wait_ready(30):
                raise RuntimeError("the cache did not become ready")
            config = Config(tls_cert_file=Path("unused"), tls_private_key_file=Path("unused"), ready_wait=0.0)
            client: TestClient[Any, Any] = TestClient(TestServer(create_app(config, cache)))
            await client.start_server()
            return client

        self.client = self.loop.run_until_complete(start())
        atexit.register(self.close)

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()

    def post(self, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
        async def send() -> tuple[int, bytes]:
            # The test client's own post() keeps every response until it closes (4 KB an input,
            # found by this target's RSS climbing): its session does not.
            url = self.client.make_url(path)
            async with self.client.session.post(url, data=body, headers={"Content-Type": content_type}) as r:
                return r.status, await r.read()

        return self.loop.run_until_complete(send())


@functools.cache
def _webhook() -> _Webhook:
    return _Webhook()


_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH", "")
_KINDS = (("karpenter.sh", "v1alpha1", "NodeOverlay", "nodeoverlays"), ("karpenter.sh", "v1", "NodePool", "nodepools"),
          ("", "v1", "ConfigMap", "configmaps"))


def review(source: provider.Bytes) -> dict[str, Any]:
    """An AdmissionReview as kube-apiserver builds it, around mutated objects, then itself
    mutated now and then."""
    group, version, kind, plural = source.pick(_KINDS)
    seeds = [d for d in seed_documents() if d.get("kind") == kind] or list(seed_documents())
    obj = provider.mutate(source.pick(seeds), source) if source.below(8) else source.value()
    old = provider.mutate(source.pick(seeds), source) if source.flag() else None
    gvk = {"group": group, "version": version, "kind": kind}
    body: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.UUID(int=source.below(1 << 64))),
            "kind": gvk, "requestKind": gvk,
            "resource": {"group": group, "version": version, "resource": plural},
            "name": obj.get("metadata", {}).get("name") if isinstance(obj, dict)
            and isinstance(obj.get("metadata"), dict) else source.text(),
            "operation": source.pick(_OPERATIONS), "object": obj, "oldObject": old,
            "dryRun": source.flag(),
        },
    }
    return provider.mutate(body, source, rounds=2) if source.below(6) == 0 else body


def admission(data: bytes) -> None:
    source = provider.Bytes(data)
    path = source.pick(("/validate", "/mutate"))
    structured = source.below(4) != 0
    if structured:
        sent: Any = review(source)
        body = json.dumps(sent).encode("utf-8", "surrogatepass")
    else:
        body = data[source.at:]
    status, raw = _webhook().post(path, body, "application/json")
    if status >= 500:
        raise Defect(f"HTTP {status}: {raw[:500]!r}")
    answer = json.loads(raw)
    if status != 200:
        if not isinstance(answer, dict) or not answer.get("error"):
            raise Defect(f"HTTP {status} without an error: {raw[:300]!r}")
        return
    response = answer["response"]
    request = sent["request"] if structured and isinstance(sent, dict) else None
    if isinstance(request, dict) and response["uid"] != request.get("uid"):
        raise Defect("the response does not carry the request's uid")
    if response["allowed"] is False and not response.get("status", {}).get("message"):
        raise Defect(f"a denial without a reason: {response}")
    for warning in response.get("warnings", ()):
        if len(warning) >= 256:
            raise Defect(f"a warning of {len(warning)} characters")


# --- the core against the reference loop -----------------------------------------------------------

@functools.cache
def _core_property() -> Callable[[bytes], Any]:
    from tests import test_engine_property

    test: Any = test_engine_property.test_engine_matches_reference
    fuzz_one_input: Callable[[bytes], Any] = test.hypothesis.fuzz_one_input
    return fuzz_one_input


def core(data: bytes) -> None:
    _core_property()(data)


# --- quantities ------------------------------------------------------------------------------------

# The strict grammar of quantity.go (no spaces, underscores, NaN, non-ASCII digits or stacked
# suffixes): on these strings the Python client is a faithful oracle for the value.
_GO_GRAMMAR = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?")
_QUANTITY_ALPHABET = "0123456789+-.eEinumkKMGTP"
_NO_SUFFIX = Decimal(10) ** 21


def _client(text: str) -> Decimal | None:
    from kubernetes import utils

    parse_quantity: Callable[[str], Decimal] = utils.parse_quantity
    with decimal.localcontext() as ctx:
        ctx.prec = 5000
        try:
            value = parse_quantity(text)
        except (ValueError, ArithmeticError):
            return None
    return value


def _lowest_digit(value: Decimal) -> int:
    """The power of ten of the last non-zero digit (0 for zero)."""
    if not value:
        return 0
    with decimal.localcontext() as ctx:
        ctx.prec = 5000
        exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    return exponent


def quantity_text(data: bytes) -> str:
    """Mostly strings over the grammar's own alphabet, so that most inputs are near-valid."""
    if data[:1] == b"\0":
        return data[1:].decode("utf-8", "replace")
    return "".join(_QUANTITY_ALPHABET[b % len(_QUANTITY_ALPHABET)] if b < 200 else chr(b) for b in data)


def quantity_check(text: str) -> None:
    try:
        value = quantity.parse(text)
    except quantity.QuantityError:
        value = None
    exponent = re.search(r"[eE][+-]?([0-9]+)$", text)
    if (_GO_GRAMMAR.fullmatch(text) and len(text) <= quantity.MAX_LENGTH
            and (exponent is None or int(exponent.group(1)) <= quantity.MAX_EXPONENT)):
        expected = _client(text)
        if expected is not None and _lowest_digit(expected) > quantity.MAX_EXPONENT:
            # Past the bound parse() puts on values (quantity.py), refusing is right.
            if value is not None:
                raise Defect(f"{text!r}: accepted past the value bound")
        elif value is None or expected is None or value != expected:
            raise Defect(f"{text!r}: parse gives {value}, the client {expected}")
    if value is None:
        return
    fmt = quantity.format_of(text)
    canonical = quantity.normalize(text)
    if quantity.normalize(canonical) != canonical:
        raise Defect(f"{text!r}: canonical form {canonical!r} is not stable")
    stored = quantity.as_stored(value, fmt)
    # Go prints the mantissa with no suffix past 999E (no suffix exists for 10^21 and up), so
    # only smaller values read back as themselves.
    if abs(stored) < _NO_SUFFIX and quantity.parse(canonical) != stored:
        raise Defect(f"{text!r}: {canonical!r} reads back as {quantity.parse(canonical)}, stored {stored}")


def quantity_target(data: bytes) -> None:
    quantity_check(quantity_text(data))


def _typed(value: Any) -> Any:
    """`value` with the type of every scalar beside it (`1 == 1.0 == True` in Python)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def read_as_tree_reads(text: str) -> bool:
    """Whether rapidyaml read `text` (`fastyaml`); Defect unless all it gives is what tree's reader gives."""
    fast = fastyaml.documents(text)
    if fast is None:
        return False
    slow = list(tree._yaml(text))
    if any(p.problem is not None for p in slow) or len(fast) != len(slow):
        raise Defect(f"rapidyaml read {len(fast)} documents, tree {[p.problem for p in slow]}")
    for f, s in zip(fast, slow, strict=True):
        # Each position as a finding asks for it (the path alone, then one that cannot be there), then all.
        for path, at in s.positions.items():
            if f.positions.get(path) != at or f.positions.get((*path, -1)) is not None:
                raise Defect(f"document {s.index}: {path} at {f.positions.get(path)} where tree has {at}")
        for what, got, want in (("index", f.index, s.index), ("value", _typed(f.value), _typed(s.value)),
                                ("plain", dict(f.plain), dict(s.plain)),
                                ("positions", dict(f.positions), dict(s.positions))):
            if got != want:
                raise Defect(f"document {s.index}: {what} {got!r} where tree has {want!r}")
        items = s.value.get("items") if isinstance(s.value, dict) else None
        if isinstance(items, list) and items and isinstance(f.positions, fastyaml.Positions):
            assert isinstance(s.positions, tree.Marks)
            if dict(f.positions.within(("items", 0))) != dict(s.positions.within(("items", 0))):
                raise Defect(f"document {s.index}: the positions of its first item differ")
    return True


def fastyaml_target(data: bytes) -> None:
    read_as_tree_reads(data.decode("utf-8", "replace"))


TARGETS: Mapping[str, Callable[[bytes], None]] = {
    "loader": loader,
    "shapes": shapes,
    "admission": admission,
    "core": core,
    "quantity": quantity_target,
    "fastyaml": fastyaml_target,
}

def once_per_process() -> None:
    """Keep, for the life of a fuzzing process, what `overlay-lint` rebuilds identically on every
    run and no input can change: the argument parser, the package version SARIF names, and the
    catalog. Reading, validating and evaluating the input itself still happen every run.

    The embedded default catalog (used where an input names InstanceType but brings no
    InstanceType document) is the same ten types as `small_catalog`: with all 1,363 such an
    input cost 0.2 s of evaluation instead of 15 ms, the loader and shapes targets ran at a few
    inputs a second, and catalog size has no bearing on how an input's shape is handled (the
    full catalog is exercised by the tests and benchmarks)."""
    from lint import sarif
    from simulation.semantics import catalog as cat
    from sources import context

    cli.build_parser = functools.cache(cli.build_parser)
    sarif.version = functools.cache(sarif.version)
    # Only ever the harness's own file (small_catalog), which does not change while it runs.
    read_catalog = functools.cache(context.read_catalog)
    context.read_catalog = read_catalog
    cat.default = functools.cache(lambda: read_catalog(small_catalog()))


def warm_up(name: str) -> None:
    """What a target builds once (the webhook, the seeds), built before the clock starts."""
    once_per_process()
    TARGETS[name](b"")
