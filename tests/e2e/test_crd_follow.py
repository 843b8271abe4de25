"""The webhook judges by the NodeOverlay CRD the cluster runs (webhook/crdwatch.py): started on Karpenter's
own, it refuses `dynamicResources` as the API server does; after the README's DRA opt-in is applied it
judges the same overlay by the extended schema, without a restart; and back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from . import _crds
from ._guard import Guard, Webhook, overlay, unique
from .test_security import forge

pytestmark = pytest.mark.e2e

GPU = {"resourceSliceTemplates": [{"metadata": {"name": "gpu-slice"}, "spec": {
    "driver": "gpu.nvidia.com",
    "devices": [{"name": "gpu-0", "attributes": {"productName": {"string": "H100"}}}]}}]}


def _codes(response: dict[str, Any]) -> set[tuple[str, str]]:
    rows = json.loads(response.get("auditAnnotations", {}).get("findings", "[]"))
    return {(row["code"], row["field"]) for row in rows}


def _generation(hook: Webhook) -> float:
    return hook.metric("overlay_guard_crd_generation", source="cluster")


def test_the_webhook_follows_the_crd_the_cluster_runs(guard: Guard, crds: _crds.Crds, label: str) -> None:
    # Its own process, never routed to: the reviews go straight to its port, so the API server's own
    # refusal of dynamicResources under Karpenter's CRD does not hide the webhook's verdict.
    hook = guard.spawn(unique("crd-follow"))
    try:
        hook.wait_crd()
        pid = hook.proc.pid if hook.proc is not None else None
        candidate = overlay(unique("e2e-crd-follow"), unique("e2e-dra-pool"), family="p5", test=label,
                            dynamicResources=GPU)
        on_karpenter = forge(hook, candidate)
        karpenter_generation = _generation(hook)

        crds.use(_crds.DRA)
        hook.wait_crd()
        on_dra = forge(hook, candidate)

        assert on_karpenter["allowed"] is False, on_karpenter
        assert ("schema", "spec.dynamicResources") in _codes(on_karpenter), on_karpenter
        assert on_dra["allowed"] is True, on_dra
        assert not any(code == "schema" for code, _ in _codes(on_dra)), on_dra
        assert _generation(hook) > karpenter_generation
        assert hook.running and hook.proc is not None and hook.proc.pid == pid
        swaps = [e for e in hook.events("judging by the cluster's NodeOverlay CRD")]
        assert [e["dynamicResources"] for e in swaps] == [False, True], swaps
    finally:
        # Karpenter's CRD back for the other tests, with the session's webhook following it.
        crds.use(_crds.KARPENTER)
        guard.webhook.wait_crd()
        hook.stop()
