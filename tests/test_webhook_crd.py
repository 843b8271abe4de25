"""The webhook follows the cluster's NodeOverlay CRD (webhook/crdwatch.py): compiled once per schema,
swapped into the cache's next snapshot, Karpenter's own (embedded) when the cluster has none or refuses the
read."""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from simulation.semantics import catalog as cat
from simulation.validation import crds
from sources import kube
from tests.webhook_support import nodepool, overlay
from webhook import crdwatch, informer, store
from webhook.state import Cache

GPU = {"resourceSliceTemplates": [{"metadata": {"name": "gpu"}, "spec": {
    "driver": "gpu.nvidia.com", "devices": [{"name": "gpu-0", "attributes": {"productName": {"string": "H100"}}}]}}]}


def dra_crd(rv: str = "1", generation: int = 1) -> dict[str, Any]:
    raw = copy.deepcopy(dict(crds.raw_dra()))
    raw["metadata"] = {**raw.get("metadata", {}), "resourceVersion": rv, "generation": generation}
    return raw


def karpenter_crd(rv: str = "1", generation: int = 1) -> dict[str, Any]:
    raw = copy.deepcopy(dict(crds.raw_karpenter()))
    raw["metadata"] = {**raw.get("metadata", {}), "resourceVersion": rv, "generation": generation}
    return raw


class Deliveries:
    def __init__(self) -> None:
        self.got: list[tuple[crds.Crd, crdwatch.Version]] = []

    def __call__(self, crd: crds.Crd, version: crdwatch.Version) -> None:
        self.got.append((crd, version))


def test_a_schema_is_compiled_once_and_its_versions_follow() -> None:
    got = Deliveries()
    follower = crdwatch.Follower(got)

    follower.observe(karpenter_crd("10", 1))
    follower.observe({**karpenter_crd("11", 1), "status": {"conditions": [{"type": "Established"}]}})
    follower.observe(dra_crd("12", 2))

    (first, v1), (same, v2), (extended, v3) = got.got
    assert not first.defines(*crds.DRA_FIELD) and extended.defines(*crds.DRA_FIELD)
    assert same is first  # a status write is no new schema
    assert [v.resource_version for v in (v1, v2, v3)] == ["10", "11", "12"]
    assert (v3.source, v3.generation) == ("cluster", 2)


def test_absent_or_unusable_falls_back_to_karpenter_crd_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    got = Deliveries()
    follower = crdwatch.Follower(got)
    broken = karpenter_crd()
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["weight"] = {
        "type": "integer", "pattern": "("}

    with caplog.at_level(logging.WARNING, logger="overlay-guard.crd"):
        follower.observe(None)
        follower.observe(None)
        follower.observe(broken)

    assert got.got == [(crds.karpenter(), crdwatch.EMBEDDED)] * 3
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


def test_a_refusal_falls_back_only_before_the_first_read(caplog: pytest.LogCaptureFixture) -> None:
    got = Deliveries()
    follower = crdwatch.Follower(got)
    denied = kube.KubeError("forbidden", 403)

    with caplog.at_level(logging.WARNING, logger="overlay-guard.crd"):
        follower.refused(denied)
        follower.refused(denied)
    assert [c for c, _ in got.got] == [crds.karpenter(), crds.karpenter()]
    assert len(caplog.records) == 1
    assert crds.NAME in str(caplog.records[0].__dict__["fields"]["needs"])

    follower.observe(karpenter_crd())
    read = got.got[-1][0]
    follower.refused(denied)
    assert got.got[-1][0] is read  # the last one read still says more than the embedded one


class FakeApi:
    """list_named/watch_named: a list per call (or an exception), then the watch's events."""

    def __init__(self, lists: list[kube.Listing | Exception], watches: list[list[Mapping[str, Any]]],
                 stop: threading.Event) -> None:
        self.lists, self.watches, self.stop = lists, watches, stop
        self.watched_from: list[str | None] = []
        self.selectors: list[tuple[kube.Resource, str]] = []

    def list_named(self, resource: kube.Resource, name: str) -> kube.Listing:
        self.selectors.append((resource, name))
        found = self.lists.pop(0)
        if isinstance(found, Exception):
            raise found
        return found

    def watch_named(self, resource: kube.Resource, name: str, resource_version: str | None,
                    seconds: int) -> Iterator[Mapping[str, Any]]:
        self.watched_from.append(resource_version)
        if not self.watches:
            self.stop.set()
            return iter(())
        return iter(self.watches.pop(0))


def test_run_lists_watches_and_relists_on_gone() -> None:
    stop = threading.Event()
    api = FakeApi(
        [kube.Listing([karpenter_crd("5")], "5"), kube.Listing([dra_crd("9", 2)], "9")],
        [[{"type": "MODIFIED", "raw_object": dra_crd("7", 2)}, {"type": "ERROR", "raw_object": {"code": 410}}],
         [{"type": "DELETED", "raw_object": dra_crd("10", 2)}]], stop)
    got = Deliveries()

    crdwatch.run(api, crdwatch.Follower(got), stop, sleep=lambda s: False)

    assert api.selectors == [(kube.CRDS, crds.NAME)] * 2
    assert api.watched_from == ["5", "9", "10"]
    assert [(c.defines(*crds.DRA_FIELD), v.resource_version) for c, v in got.got] == [
        (False, "5"), (True, "7"), (True, "9"), (False, "")]
    assert got.got[-1] == (crds.karpenter(), crdwatch.EMBEDDED)


def test_run_waits_long_after_a_refusal_and_backs_off_otherwise() -> None:
    stop = threading.Event()
    api = FakeApi([kube.KubeError("forbidden", 403), kube.Unreachable("refused"), kube.Listing([], "3")], [], stop)
    got = Deliveries()
    slept: list[float] = []

    def sleep(seconds: float) -> bool:
        slept.append(seconds)
        return False

    crdwatch.run(api, crdwatch.Follower(got), stop, backoff=informer.Backoff(base=0.5), sleep=sleep)

    assert slept[0] == crdwatch.FORBIDDEN_RETRY and 0.25 <= slept[1] <= 0.5
    assert [v for _, v in got.got] == [crdwatch.EMBEDDED, crdwatch.EMBEDDED]


class FakeSource:
    """informer.KubeSource's `client` and `spawn`, over a FakeApi-like client fed by the test."""

    def __init__(self) -> None:
        self.events: list[Mapping[str, Any] | None] = []
        self.listing = kube.Listing([karpenter_crd("1")], "1")
        # The test lets the first list answer when it wants.
        self.answer = threading.Event()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.client = self

    def list_named(self, resource: kube.Resource, name: str) -> kube.Listing:
        self.answer.wait(10)
        return self.listing

    def watch_named(self, resource: kube.Resource, name: str, resource_version: str | None,
                    seconds: int) -> Iterator[Mapping[str, Any]]:
        while not self.stop.is_set():
            if self.events:
                yield {"type": "MODIFIED", "raw_object": self.events.pop(0)}
            self.stop.wait(0.01)

    def spawn(self, name: str, target: Callable[[threading.Event], None]) -> None:
        thread = threading.Thread(target=target, args=(self.stop,), name=name, daemon=True)
        thread.start()
        self.threads.append(thread)


def schema_errors(report: Any) -> list[tuple[str | int, ...]]:
    return [f.path for f in report.findings if f.code == "schema"]


def in_use_gauge(in_use: crdwatch.InUse) -> tuple[dict[str, str], float]:
    (family,) = in_use.collect()
    (sample,) = family.samples
    return sample.labels, sample.value


async def test_the_cache_waits_for_the_crd_and_swaps_it_without_a_restart(small_catalog: cat.Catalog) -> None:
    cache = Cache(debounce=0.01)
    in_use = crdwatch.InUse(cache)
    source = FakeSource()
    cache.expect(store.KINDS)
    cache.set_catalog(small_catalog)
    await cache.start()
    try:
        in_use.follow(source, asyncio.get_running_loop())
        cache.load([nodepool("p")])
        assert not await cache.wait_ready(0.3)  # the objects are synced, the CRD is not read yet
        source.answer.set()
        assert await cache.wait_ready(10)
        candidate = overlay("gpu")
        candidate["spec"]["dynamicResources"] = GPU
        assert schema_errors(await cache.simulate(candidate, "CREATE", None)) == [("spec", "dynamicResources")]
        assert in_use_gauge(in_use) == ({"source": "cluster", "resource_version": "1"}, 1)
        before = cache.snapshot.generation

        source.events.append(dra_crd("2", 2))
        for _ in range(400):
            prepared = cache.snapshot.prepared
            if prepared is not None and prepared.crd is not None and prepared.crd.defines(*crds.DRA_FIELD):
                break
            await asyncio.sleep(0.025)

        assert cache.snapshot.generation > before
        assert schema_errors(await cache.simulate(candidate, "CREATE", None)) == []
        assert in_use_gauge(in_use) == ({"source": "cluster", "resource_version": "2"}, 2)
    finally:
        source.answer.set()
        source.stop.set()
        await cache.close()


def test_a_pinned_crd_names_its_source() -> None:
    # The gauge's source: `--crd dra` is the embedded DRA-extended CRD, anything else a file.
    assert [crdwatch.pinned(v).source for v in ("dra", "./dra", "crd.yaml")] == ["dra", "file", "file"]
