"""The admission chain a NodeOverlay write goes through, read from the cluster's
ValidatingWebhookConfigurations: how long the API server may still take after this webhook has
answered (the deadline of a ledger record, webhook/ledger.py) and how long this webhook has to
answer (the decision budget, below its own timeoutSeconds).

The API server calls validating webhooks in parallel and persists the object once all have
answered, so a record admitted now is stored, if ever, within the longest `timeoutSeconds` among
the other webhooks that validate NodeOverlays, plus the write itself (`PERSIST`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger("overlay-guard.chain")

VALIDATOR = "nodeoverlays.validate.overlay-guard.io"
# admissionregistration.k8s.io/v1's default timeoutSeconds, and its largest.
DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 30.0
# The write to etcd after the last webhook answered, and clock skew between replicas (deadlines are
# wall-clock times that another replica compares with its own clock).
PERSIST = 3.0
# What the manifests and the chart configure for this webhook.
OWN_TIMEOUT = 5.0
# How often the configurations are read again.
REFRESH = 60.0
GROUP, RESOURCE = "karpenter.sh", "nodeoverlays"


@dataclasses.dataclass(frozen=True)
class Chain:
    """`own`: this webhook's timeoutSeconds; `others`: the other webhooks that validate NodeOverlay
    writes, with theirs."""

    own: float = OWN_TIMEOUT
    others: tuple[tuple[str, float], ...] = ()

    @property
    def after(self) -> float:
        """Seconds from this webhook's answer until the object is stored, if it ever is."""
        return max((t for _, t in self.others), default=0.0) + PERSIST

    @property
    def budget(self) -> float:
        """Seconds a decision may take: a second under the API server's timeout (half of it for the
        shortest ones), so the answer arrives while the API server still waits for it."""
        return max(self.own * 0.5, self.own - 1.0)


# When the configurations cannot be read (no RBAC for them, an API server that refuses): the longest
# chain the API server allows.
UNKNOWN = Chain(OWN_TIMEOUT, (("(webhook configurations not readable)", MAX_TIMEOUT),))


def _covers(rule: Mapping[str, Any]) -> bool:
    def has(field: str, *wanted: str) -> bool:
        values = rule.get(field) or ()
        return any(v in values for v in wanted)

    return (has("apiGroups", GROUP, "*") and has("resources", RESOURCE, "*", "*/*")
            and has("operations", "CREATE", "UPDATE", "*"))


def read(configurations: Iterable[Mapping[str, Any]]) -> Chain:
    """The chain from ValidatingWebhookConfiguration objects. Selectors and matchConditions may
    spare some NodeOverlays; a webhook that has them still counts (the longer deadline is the safe one)."""
    own = OWN_TIMEOUT
    others = []
    for config in configurations:
        for hook in config.get("webhooks") or ():
            if not any(_covers(r) for r in hook.get("rules") or ()):
                continue
            timeout = float(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT)
            if hook.get("name") == VALIDATOR:
                own = timeout
            else:
                name = (config.get("metadata") or {}).get("name", "")
                others.append((f"{name}/{hook.get('name', '')}", timeout))
    return Chain(own, tuple(sorted(others)))


async def follow(api_client: Any, apply: Any, interval: float = REFRESH) -> None:
    """Read the configurations now and every `interval`, handing each Chain to `apply`."""
    import kubernetes

    k8s: Any = kubernetes
    api = k8s.client.AdmissionregistrationV1Api(api_client)
    last: Chain | None = None
    while True:
        try:
            listing = await asyncio.to_thread(api.list_validating_webhook_configuration, _request_timeout=10)
            chain = read(api.api_client.sanitize_for_serialization(i) for i in listing.items)
        except Exception as exc:
            chain = UNKNOWN if last is None else last
            log.warning("cannot read the validating webhook configurations; assuming the longest admission chain"
                        if last is None else "cannot read the validating webhook configurations; keeping the last",
                        extra={"fields": {"error": f"{type(exc).__name__}: {exc}"[:300]}})
        if chain != last:
            log.info("admission chain", extra={"fields": {
                "timeoutSeconds": chain.own, "others": [f"{n}={t:g}s" for n, t in chain.others],
                "recordDeadlineSeconds": chain.after, "decisionBudgetSeconds": chain.budget}})
            apply(chain)
            last = chain
        await asyncio.sleep(interval)
