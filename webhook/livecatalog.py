"""The webhook's live catalog (docs/live-catalog.md): Karpenter's metrics read at start and every
`--karpenter-metrics-interval`, each good read swapped in whole; a failed read keeps the catalog in use (the last
good one, else the embedded one), so the guard never judges against none. Its source, age and last error are a
gauge and /readyz detail (webhook/state.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from simulation.semantics import catalog as cat
from sources import files, karpenter, kube
from webhook.state import Cache

log = logging.getLogger("overlay-guard.catalog")
SOURCE = "karpenter"


class Refresher:
    def __init__(self, cache: Cache, where: karpenter.Where, embedded: cat.Catalog, interval: float,
                 client: kube.Client | None = None, wall: Callable[[], float] = time.time) -> None:
        self.cache, self.where, self.embedded, self.interval, self.client = cache, where, embedded, interval, client
        self._wall = wall
        self.failures = 0

    async def refresh(self) -> bool:
        """One read; True when a catalog was swapped in."""
        documents = self.cache.documents()
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._wall()))
        try:
            live = await asyncio.to_thread(karpenter.read_live, self.where, self.embedded, documents, self.client, at,
                                           self.cache.crd)
        except (files.InputError, cat.CatalogError) as err:
            self._failed(str(err))
            return False
        except Exception as err:  # a bug in reading must cost the refresh, never the webhook
            self._failed(f"{type(err).__name__}: {kube.one_line(err)}")
            return False
        self.cache.replace_catalog(live.catalog, SOURCE, live.published)
        log.info("live catalog read", extra={"fields": {"where": self.where.describe(),
                                                        "instanceTypes": len(live.catalog.types), "notes": live.notes}})
        return True

    def _failed(self, error: str) -> None:
        self.failures += 1
        self.cache.catalog_error = error
        log.warning("cannot read Karpenter's metrics; the catalog in use is kept", extra={"fields": {
            "where": self.where.describe(), "error": error, "kept": self.cache.catalog_source}})

    async def run(self) -> None:
        # Prices are recovered against the cluster's overlays: none are known before the first sync.
        while not await self.cache.wait_ready(3600):
            pass
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval)
