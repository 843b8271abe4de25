"""The webhook's settings: one frozen value built by the CLI and read by everything else."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from webhook.listener import Limits
from webhook.store import MAX_PENDING

Mode = Literal["enforce", "warn"]
MAX_BODY_BYTES = 3 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Config:
    tls_cert_file: Path
    tls_private_key_file: Path
    port: int = 9443
    metrics_port: int = 8080
    host: str = "0.0.0.0"
    catalog: Path | None = None
    # A pinned NodeOverlay CRD, `dra` or a file (default: the cluster's, followed; Karpenter's own, embedded,
    # with --state).
    crd: str | None = None
    region: str | None = None
    # The live catalog (webhook/livecatalog.py): Karpenter's metrics at a URL, or its Service (NS/NAME[:PORT])
    # through the API server; read every interval seconds.
    karpenter_metrics: str | None = None
    karpenter_service: str | None = None
    karpenter_metrics_interval: float = 300.0
    kubeconfig: Path | None = None
    state: tuple[Path, ...] = ()
    mode: Mode = "enforce"
    client_ca: Path | None = None
    # At most this many admissions in flight in the ledger (webhook/ledger.py); more are refused with 503.
    max_pending: int = MAX_PENDING
    # Seconds a decision may take (None: a second under the webhook configuration's timeoutSeconds).
    decision_budget: float | None = None
    # Seconds from an admission until its object is stored if ever (None: from the cluster's validating
    # webhooks for NodeOverlays, webhook/chain.py).
    admission_chain: float | None = None
    # The ledger's Lease (its namespace: lease_namespace's).
    ledger_name: str = "overlay-guard-admissions"
    # Coalescing window for snapshot rebuilds after watch events.
    debounce: float = 0.1
    max_body_bytes: int = MAX_BODY_BYTES
    # A client that has not sent its whole body by then is cut off (408).
    read_timeout: float = 10.0
    # Longest a request in flight may take to finish after SIGTERM.
    shutdown_timeout: float = 25.0
    # NodePool checks simulate every overlay again; under the API server's 5 s timeout.
    nodepool_timeout: float = 4.0
    # How long an overlay request waits for the first sync before it is refused.
    ready_wait: float = 2.0
    # Connection cap and timeouts, per listening port.
    limits: Limits = dataclasses.field(default_factory=Limits)
    # The audit (webhook/audit.py): period (0: off; None: 600 s with a cluster, off with --state),
    # settling time after a change, events per audit.
    audit_interval: float | None = None
    audit_debounce: float = 2.0
    audit_max_events: int = 100
    # Seconds a disagreement with Karpenter's status or prices must last to be reported.
    prediction_grace: float = 120.0
    # Its Lease (namespace None: the pod's own, else overlay-guard) and client-go's timings.
    lease_name: str = "overlay-guard-audit"
    lease_namespace: str | None = None
    lease_duration: float = 15.0
    lease_renew_deadline: float = 10.0
    lease_retry_period: float = 2.0

    @property
    def enforce(self) -> bool:
        return self.mode == "enforce"
