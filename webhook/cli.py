"""`overlay-webhook`: the admission webhook's command line (docs/design.md §2.4)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from sources import karpenter
from webhook import logs, server, store
from webhook.config import Config
from webhook.listener import Limits


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="overlay-webhook",
        description="Admission webhook for Karpenter NodeOverlays: denies overlays that conflict, "
                    "annotates them with their simulated effect.")
    p.add_argument("--tls-cert-file", type=Path, required=True,
                   help="serving certificate (PEM); re-read when it changes")
    p.add_argument("--tls-private-key-file", type=Path, required=True, help="its private key (PEM)")
    p.add_argument("--port", type=int, default=9443, help="HTTPS port (default 9443; 0 picks a free one)")
    p.add_argument("--metrics-port", type=int, default=8080, help="plain-HTTP /metrics port (default 8080)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--catalog", type=Path, help="instance-type catalog (JSON format or InstanceType YAML); "
                                                "default: the embedded AWS us-east-1 catalog")
    p.add_argument("--region", help="the cluster's region, e.g. eu-west-1 (default: its Nodes' "
                                    "topology.kubernetes.io/region, else the one the --state objects name, else "
                                    "the catalog's)")
    live = p.add_argument_group("live catalog", "the cluster's catalog from Karpenter's metrics instead of the "
                                                "embedded one, read again periodically (docs/live-catalog.md)")
    live.add_argument("--karpenter-metrics", metavar="URL", help="Karpenter's metrics at URL")
    live.add_argument("--karpenter-service", metavar="NS/NAME[:PORT]",
                      help="Karpenter's metrics Service, read through the API server's service proxy (port default "
                           "http-metrics)")
    live.add_argument("--karpenter-metrics-interval", type=float, default=300.0, metavar="SECONDS",
                      help="seconds between reads (default 300); a failed read keeps the catalog in use")
    p.add_argument("--crd", metavar="FILE|dra",
                   help="pin the NodeOverlay CRD to validate against: a CRD file, or dra for the embedded "
                        "DRA-extended one (default: the cluster's, followed as it changes; with --state, or when "
                        "it cannot be read, Karpenter's own, embedded)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--kubeconfig", type=Path, help="watch the cluster of this kubeconfig "
                                                        "(default: in-cluster configuration)")
    source.add_argument("--state", type=Path, nargs="+", metavar="PATH",
                        help="read NodeOverlays and NodePools from files/directories instead of a cluster")
    p.add_argument("--mode", choices=("enforce", "warn"), default="enforce",
                   help="enforce: deny on errors; warn: allow and return errors as warnings")
    p.add_argument("--client-ca", type=Path,
                   help="require API-server client certificates signed by this CA (a PEM bundle, re-read when "
                        "it changes)")
    p.add_argument("--max-connections", type=int, default=Limits.max_connections,
                   help="concurrent connections per port, TLS handshakes included; more are closed at once "
                        f"(default {Limits.max_connections})")
    p.add_argument("--tls-handshake-timeout", type=float, default=Limits.handshake_timeout,
                   help=f"seconds a client has to finish the TLS handshake (default {Limits.handshake_timeout:g})")
    p.add_argument("--request-header-timeout", type=float, default=Limits.header_timeout,
                   help="seconds a client has to send a request's headers, from its first byte (for the first "
                        f"request, from the end of the handshake; default {Limits.header_timeout:g})")
    p.add_argument("--idle-timeout", type=float, default=Limits.idle_timeout,
                   help="seconds an idle keep-alive connection is kept; above the API server's 90 "
                        f"(default {Limits.idle_timeout:g})")
    ledger = p.add_argument_group("ledger", "admissions in flight, recorded in a Lease so that replicas never "
                                            "admit two conflicting overlays")
    ledger.add_argument("--max-pending", type=int, default=store.MAX_PENDING,
                        help="admissions in flight the ledger holds at most; more are refused with 503 "
                             f"(default {store.MAX_PENDING})")
    ledger.add_argument("--decision-budget", type=float,
                        help="seconds a NodeOverlay decision may take before it is refused with 503 (default: a "
                             "second under the webhook configuration's timeoutSeconds, read from the cluster)")
    ledger.add_argument("--admission-chain-seconds", type=float,
                        help="seconds from an admission until the API server has stored the object, if it ever "
                             "does: a record is not read as never stored before (default: the longest timeoutSeconds "
                             "of the other validating webhooks for NodeOverlays, read from the cluster, plus 3)")
    ledger.add_argument("--ledger-lease", default="overlay-guard-admissions",
                        help="name of the ledger's Lease, in the namespace of the audit Lease "
                             "(default overlay-guard-admissions)")
    p.add_argument("--shutdown-timeout", type=float, default=25.0,
                   help="seconds to finish requests in flight after SIGTERM (default 25)")
    audit = p.add_argument_group("audit", "re-evaluate every cached overlay and report as Events and gauges; "
                                          "the replica holding the Lease writes")
    audit.add_argument("--audit-interval", type=float,
                       help="seconds between audits besides the one after every change (default 600; 0: no audit; "
                            "with --state off unless given, and it only logs)")
    audit.add_argument("--audit-debounce", type=float, default=2.0,
                       help="seconds the cache must be unchanged before a change is audited (default 2)")
    audit.add_argument("--audit-max-events", type=int, default=100,
                       help="events written per audit at most; the rest wait for the next audit (default 100)")
    audit.add_argument("--prediction-grace", type=float, default=120.0,
                       help="seconds a disagreement between the audit's prediction and Karpenter's status condition "
                            "(or published prices) must last before it is an OverlayPredictionMismatch event and "
                            "counts in overlay_guard_prediction_mismatches (default 120)")
    audit.add_argument("--leader-election-namespace",
                       help="namespace of the audit Lease (default: the pod's namespace, else overlay-guard)")
    audit.add_argument("--leader-election-lease", default="overlay-guard-audit",
                       help="name of the audit Lease (default overlay-guard-audit)")
    audit.add_argument("--lease-duration", type=float, default=15.0,
                       help="seconds a follower waits for a silent leader before taking over (default 15)")
    audit.add_argument("--lease-renew-deadline", type=float, default=10.0,
                       help="seconds a leader keeps leading without a successful renewal (default 10)")
    audit.add_argument("--lease-retry-period", type=float, default=2.0,
                       help="seconds between attempts to acquire or renew (default 2)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and usage errors; we return instead
        return exc.code if isinstance(exc.code, int) else 2
    timeouts = (args.tls_handshake_timeout, args.request_header_timeout, args.idle_timeout,
                1.0 if args.decision_budget is None else args.decision_budget)
    counts = (args.max_connections, args.max_pending)
    if args.port < 0 or args.metrics_port < 0 or min(timeouts) <= 0 or min(counts) < 1 \
            or (args.admission_chain_seconds or 0) < 0:
        print("overlay-webhook: ports must be >= 0, timeouts and --decision-budget > 0, --admission-chain-seconds "
              ">= 0, --max-connections and --max-pending >= 1", file=sys.stderr)
        return 2
    if args.karpenter_metrics_interval <= 0 or (args.catalog and (args.karpenter_metrics or args.karpenter_service)) \
            or (args.karpenter_metrics and args.karpenter_service) or (args.karpenter_service and args.state):
        print("overlay-webhook: --karpenter-metrics-interval > 0; one of --catalog, --karpenter-metrics and "
              "--karpenter-service; --karpenter-service needs a cluster (not --state)", file=sys.stderr)
        return 2
    if not (0 < args.lease_retry_period < args.lease_renew_deadline < args.lease_duration) \
            or (args.audit_interval or 0) < 0 or args.audit_debounce < 0 or args.audit_max_events < 1 \
            or not args.prediction_grace >= 0:
        print("overlay-webhook: need 0 < --lease-retry-period < --lease-renew-deadline < --lease-duration, "
              "--audit-interval, --audit-debounce and --prediction-grace >= 0, --audit-max-events >= 1",
              file=sys.stderr)
        return 2
    try:
        if args.karpenter_service:
            karpenter.parse_service(args.karpenter_service)
    except karpenter.MetricsError as err:
        print(f"overlay-webhook: {err}", file=sys.stderr)
        return 2
    config = Config(
        tls_cert_file=args.tls_cert_file, tls_private_key_file=args.tls_private_key_file,
        port=args.port, metrics_port=args.metrics_port, host=args.host, catalog=args.catalog, crd=args.crd,
        region=args.region, karpenter_metrics=args.karpenter_metrics, karpenter_service=args.karpenter_service,
        karpenter_metrics_interval=args.karpenter_metrics_interval,
        kubeconfig=args.kubeconfig, state=tuple(args.state or ()), mode=args.mode, client_ca=args.client_ca,
        max_pending=args.max_pending, decision_budget=args.decision_budget,
        admission_chain=args.admission_chain_seconds, ledger_name=args.ledger_lease,
        shutdown_timeout=args.shutdown_timeout, audit_interval=args.audit_interval,
        audit_debounce=args.audit_debounce, audit_max_events=args.audit_max_events,
        prediction_grace=args.prediction_grace,
        lease_name=args.leader_election_lease, lease_namespace=args.leader_election_namespace,
        lease_duration=args.lease_duration, lease_renew_deadline=args.lease_renew_deadline,
        lease_retry_period=args.lease_retry_period,
        limits=Limits(max_connections=args.max_connections, handshake_timeout=args.tls_handshake_timeout,
                      header_timeout=args.request_header_timeout, idle_timeout=args.idle_timeout))
    logs.setup(args.log_level)
    try:
        return asyncio.run(server.serve(config))
    except KeyboardInterrupt:
        return 130


def entrypoint() -> None:
    sys.exit(main())
