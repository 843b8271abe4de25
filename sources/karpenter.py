"""Karpenter's own catalog, read from its metrics exposition: the offering cells the cloud provider publishes.

The AWS, Azure and OCI providers' metrics controllers (karpenter-provider-aws `pkg/controllers/metrics`) publish,
per (instance_type, capacity_type, zone), `karpenter_cloudprovider_instance_type_offering_available` (1/0) and
`karpenter_cloudprovider_instance_type_offering_price_estimate` (USD per hour, **after overlays**: the controller
is handed the overlay-decorated cloud provider, so simulation/live.py recovers base prices).

The exposition is read with a byte cap (MAX_BYTES) and a cap on the series kept (MAX_SERIES); the parser reads
only the two families, line by line, so memory stays bounded by those caps whatever the body holds (and it is 3 to
5 times quicker than prometheus_client's parser, which is its test oracle: docs/design.md §8). A body that
cannot be trusted (over a cap, truncated, unparseable lines of those families, a series given twice with two
values, none of the series at all) is a MetricsError; a doubtful cell (a price that is not a finite non-negative
number, a price without an availability series or the reverse) is left out or kept without its price, with a note.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, BinaryIO

from simulation import evaluate as ev
from simulation import live
from simulation.semantics import catalog as cat
from simulation.validation import crds
from sources import files, kube

# A region's whole table is ~1,400 types x 6 zones x 3 capacity types x 2 series, a few MiB with Karpenter's
# other metrics: 32 MiB leaves room for a busy controller and stops a runaway body long before it hurts.
MAX_BYTES = 32 * 1024 * 1024
# Series of the two families kept (both counted): twice a large region's ~50,000.
MAX_SERIES = 100_000
TIMEOUT_SECONDS = 30
AVAILABLE = "karpenter_cloudprovider_instance_type_offering_available"
PRICE = "karpenter_cloudprovider_instance_type_offering_price_estimate"
LABELS = ("instance_type", "capacity_type", "zone")
# The Helm chart's Service: found by this label, its metrics port by this name.
SERVICE_SELECTOR = "app.kubernetes.io/name=karpenter"
METRICS_PORT = "http-metrics"

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?[ \t]*")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(?:,|$)')
_OURS = (AVAILABLE.encode(), PRICE.encode())
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class MetricsError(files.InputError):
    """Karpenter's metrics could not be read or cannot be trusted; the message is one line."""


class Unreachable(MetricsError):
    """Nothing answered where Karpenter's metrics were looked for."""


def parse(body: bytes, max_series: int = MAX_SERIES) -> tuple[tuple[live.Cell, ...], tuple[str, ...]]:
    """The offering cells of a text exposition (Prometheus text format 0.0.4), and notes on what was left out."""
    if not body.endswith(b"\n"):
        raise MetricsError("the metrics body is truncated (it does not end with a newline)")
    available: dict[tuple[str, str, str], float] = {}
    prices: dict[tuple[str, str, str], float] = {}
    # Line by line from the body (no list of all its lines): memory stays the body's and the kept series'.
    for number, raw in enumerate(io.BytesIO(body), 1):
        if not raw.startswith(_OURS):
            continue
        line = raw.rstrip(b"\n").decode("utf-8", "replace")
        found = _SAMPLE.fullmatch(line)
        if found is None or found.group(1) not in (AVAILABLE, PRICE):
            if found is not None:
                continue  # a family whose name only starts as ours do
            raise MetricsError(f"metrics line {number} cannot be parsed: {_short(line)}")
        family = found.group(1)
        key = _key(found.group(2) or "", number, line)
        value = _value(found.group(3), number, line)
        series = available if family == AVAILABLE else prices
        if key in series and series[key] != value and not (math.isnan(series[key]) and math.isnan(value)):
            raise MetricsError(f"metrics line {number}: {family}{{{_labels(key)}}} appears twice with different "
                               f"values ({series[key]:g} and {value:g})")
        series[key] = value
        if len(available) + len(prices) > max_series:
            raise MetricsError(f"the metrics hold more than {max_series} offering series: refused")
    if not available and not prices:
        raise MetricsError(f"the metrics hold no {AVAILABLE} or {PRICE} series: Karpenter's cloud provider does "
                           "not publish its offerings there (the AWS, Azure and OCI providers do)")
    return _cells(available, prices)


def _cells(available: Mapping[tuple[str, str, str], float],
           prices: Mapping[tuple[str, str, str], float]) -> tuple[tuple[live.Cell, ...], tuple[str, ...]]:
    notes: list[str] = []
    unpaired = sorted(prices.keys() - available.keys())
    if unpaired:
        notes.append(f"{len(unpaired)} offering(s) have a price but no availability series and are left out "
                     f"(e.g. {_labels(unpaired[0])})")
    cells: list[live.Cell] = []
    bad: list[tuple[str, str, str]] = []
    unpriced: list[tuple[str, str, str]] = []
    for key in sorted(available):
        flag = available[key]
        if flag not in (0.0, 1.0):
            bad.append(key)
            continue
        price = prices.get(key)
        if price is None:
            unpriced.append(key)
        elif not math.isfinite(price) or price < 0:
            bad.append(key)
            price = None
        cells.append(live.Cell(*key, available=flag == 1.0, price=price))
    if unpriced:
        notes.append(f"{len(unpriced)} offering(s) have no price series: their base price is the embedded one, "
                     f"estimated (e.g. {_labels(unpriced[0])})")
    if bad:
        notes.append(f"{len(bad)} offering(s) carry an availability other than 0/1 or a price that is not a finite, "
                     f"non-negative number: the value is ignored (e.g. {_labels(bad[0])})")
    if not cells:
        raise MetricsError(f"the metrics hold no {AVAILABLE} series: no offering can be read")
    return tuple(cells), tuple(notes)


def _key(text: str, number: int, line: str) -> tuple[str, str, str]:
    labels: dict[str, str] = {}
    position = 0
    while position < len(text):
        found = _LABEL.match(text, position)
        if not found or found.end() == position:
            raise MetricsError(f"metrics line {number}: labels cannot be parsed: {_short(line)}")
        labels[found.group(1)] = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], found.group(2))
        position = found.end()
    missing = [name for name in LABELS if not labels.get(name)]
    if missing:
        raise MetricsError(f"metrics line {number}: no {', '.join(missing)} label: {_short(line)}")
    return labels["instance_type"], labels["capacity_type"], labels["zone"]


def _value(text: str, number: int, line: str) -> float:
    try:
        # Go writes NaN and +Inf/-Inf, which float() reads.
        return float(text)
    except ValueError:
        raise MetricsError(f"metrics line {number}: {text!r} is not a number: {_short(line)}") from None


def _labels(key: tuple[str, str, str]) -> str:
    return ",".join(f'{name}="{value}"' for name, value in zip(LABELS, key, strict=True))


def _short(line: str) -> str:
    return line if len(line) <= 120 else line[:117] + "..."


def read_bounded(chunks: Iterable[bytes], max_bytes: int = MAX_BYTES) -> bytes:
    """A body read chunk by chunk, refused as soon as it passes `max_bytes`."""
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise MetricsError(f"the metrics body is larger than {max_bytes} bytes: refused")
        parts.append(chunk)
    return b"".join(parts)


def fetch_url(url: str, max_bytes: int = MAX_BYTES, timeout: float = TIMEOUT_SECONDS) -> bytes:
    """The body at `url` (http or https)."""
    if not url.startswith(("http://", "https://")):
        raise MetricsError(f"--karpenter-metrics {url}: an http:// or https:// URL is expected")
    # Here, not at the top: urllib.request brings http.client, ssl and email, a tenth of a one-file check's start-up.
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return read_bounded(iter(lambda: response.read(65536), b""), max_bytes)
    except urllib.error.HTTPError as err:
        raise Unreachable(f"cannot read Karpenter's metrics at {url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise Unreachable(f"cannot reach Karpenter's metrics at {url}: {kube.one_line(reason)}") from None


@dataclasses.dataclass(frozen=True)
class Service:
    namespace: str
    name: str
    port: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}:{self.port}"

    @property
    def resource(self) -> str:
        """`NAME:PORT`: the name the service proxy is asked for, and the resource name RBAC sees."""
        return f"{self.name}:{self.port}"

    @property
    def proxy_path(self) -> str:
        """The API server's service proxy to /metrics."""
        return f"/api/v1/namespaces/{self.namespace}/services/{self.resource}/proxy/metrics"


@dataclasses.dataclass(frozen=True)
class Where:
    """Where the metrics are read: a URL, a captured file (`-`: standard input), or a Service through the API
    server's proxy."""

    url: str | None = None
    service: Service | None = None
    path: str | None = None

    def describe(self) -> str:
        if self.path is not None:
            return "standard input" if self.path == files.STDIN else self.path
        return self.url if self.url is not None else f"service {self.service} (API server proxy)"


def where_of(text: str) -> Where:
    """`--karpenter-metrics URL|FILE|-`: an http(s) URL is fetched, anything else is a captured exposition."""
    return Where(url=text) if text.startswith(("http://", "https://")) else Where(path=text)


def read_file(path: str, stdin: BinaryIO | None = None, max_bytes: int = MAX_BYTES) -> bytes:
    """A captured exposition (`curl .../metrics > metrics.txt`), or standard input for `-`, under the byte cap."""
    if path == files.STDIN:
        stream = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise MetricsError("--karpenter-metrics -: there is no standard input to read")
        return read_bounded(iter(lambda: stream.read(65536), b""), max_bytes)
    try:
        with open(path, "rb") as handle:
            return read_bounded(iter(lambda: handle.read(65536), b""), max_bytes)
    except OSError as err:
        raise MetricsError(f"--karpenter-metrics {path}: {err.strerror or err}") from None


def parse_service(text: str) -> Service:
    """`NS/NAME[:PORT]` (--karpenter-service); the port defaults to the chart's `http-metrics`."""
    namespace, slash, rest = text.partition("/")
    name, _, port = rest.partition(":")
    if not slash or not namespace or not name:
        raise MetricsError(f"--karpenter-service {text}: NAMESPACE/NAME[:PORT] is expected")
    return Service(namespace, name, port or METRICS_PORT)


def locate(client: kube.Client, named: str | None) -> Where:
    """Where the cluster's Karpenter publishes its metrics: `named` (NS/NAME[:PORT]), else the Helm chart's
    Service (label app.kubernetes.io/name=karpenter, port http-metrics)."""
    if named:
        return Where(service=parse_service(named))
    try:
        services = client.services(SERVICE_SELECTOR)
    except kube.KubeError as err:
        raise Unreachable(f"cannot find Karpenter's Service: {err}") from None
    for service in services:
        meta, spec = service.get("metadata") or {}, service.get("spec") or {}
        if any(isinstance(p, dict) and p.get("name") == METRICS_PORT for p in spec.get("ports") or []):
            return Where(service=Service(str(meta.get("namespace")), str(meta.get("name")), METRICS_PORT))
    raise Unreachable(f"no Service labelled {SERVICE_SELECTOR} with a port {METRICS_PORT} in the cluster: is "
                      "Karpenter installed? (--karpenter-service NS/NAME[:PORT] names it)")


def capture(where: Where, client: kube.Client | None = None, max_bytes: int = MAX_BYTES,
            stdin: BinaryIO | None = None) -> tuple[tuple[live.Cell, ...], tuple[str, ...]]:
    """The cells from `where` (a URL, a file or standard input, or a Service through `client`)."""
    if where.path is not None:
        return parse(read_file(where.path, stdin, max_bytes))
    if where.service is None:
        assert where.url is not None
        return parse(fetch_url(where.url, max_bytes))
    assert client is not None
    service = where.service
    try:
        # Closed at once when the cap stops the read, so the connection goes back to the pool.
        with contextlib.closing(client.proxy_get(service.namespace, service.resource, "metrics")) as chunks:
            body = read_bounded(chunks, max_bytes)
    except kube.KubeError as err:
        raise Unreachable(f"Karpenter's metrics through {service.proxy_path}: {err}") from None
    return parse(body)


def node_types(nodes: Sequence[Mapping[str, Any]]) -> list[live.NodeType]:
    """Per instance type among the Nodes: the labels all its Nodes share, and one Node's allocatable."""
    out: dict[str, live.NodeType] = {}
    for node in nodes:
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if isinstance(k, str) and isinstance(v, str)}
        name = labels.get(live.INSTANCE_TYPE)
        if not name:
            continue
        allocatable = {k: str(v) for k, v in (status.get("allocatable") or {}).items() if isinstance(k, str)}
        seen = out.get(name)
        if seen is None:
            out[name] = live.NodeType(name, labels, allocatable)
        else:
            shared = {k: v for k, v in seen.labels.items() if labels.get(k) == v}
            out[name] = dataclasses.replace(seen, labels=shared)
    return list(out.values())


@dataclasses.dataclass(frozen=True)
class Live:
    """One read of Karpenter's metrics: the catalog built from it, what was noted on the way, and the effective
    prices as published, per (instance type, capacity type, zone), for the audit to compare with."""

    catalog: cat.Catalog
    notes: list[str]
    published: Mapping[tuple[str, str, str], float]


def read_live(where: Where, embedded: cat.Catalog, documents: Sequence[ev.Document] | None,
              client: kube.Client | None = None, at: str = "", crd: crds.Crd | None = None,
              stdin: BinaryIO | None = None) -> Live:
    """The live catalog from `where`: cells from the metrics, labels from the embedded table and the Nodes
    (through `client`, when there is one), base prices recovered against `documents`, the overlays in effect (None:
    unknown), judged under `crd`, the run's (simulation/live.py). `at`: when the metrics were read."""
    cells, notes = capture(where, client, stdin=stdin)
    at = _written_at(where.path) if where.path is not None else at
    nodes = node_types(_nodes(client)) if client is not None else []
    built = live.build(cells, embedded, nodes)
    recovered = live.recover(built.catalog, cells, documents, crd=crd, at=at, unplaced=built.unplaced)
    counts = recovered.counts
    captured = (("from", "karpenter-metrics"), ("where", where.describe()), ("at", at),
                *((k, str(counts[k])) for k in cat.PRICE_ORIGINS))
    said = [*notes, *built.notes, *recovered.notes]
    catalog = dataclasses.replace(recovered.catalog, captured=captured, assumptions=tuple(said),
                                  source=f"Karpenter's metrics at {where.describe()}")
    published = {(c.instance_type, c.capacity_type, c.zone): c.price for c in cells if c.price is not None}
    return Live(catalog, said, published)


def _written_at(path: str) -> str:
    """When a captured exposition was scraped, as far as can be told: its file's modification time (standard input:
    unknown, "")."""
    if path == files.STDIN:
        return ""
    try:
        written = os.stat(path).st_mtime
    except OSError:
        return ""
    return datetime.datetime.fromtimestamp(written, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _nodes(client: kube.Client) -> Sequence[Mapping[str, Any]]:
    """The Nodes, which only add labels and resources: none where they cannot be read."""
    try:
        return client.nodes()
    except kube.KubeError:
        return []
