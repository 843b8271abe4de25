"""`python -m certs --out DIR --namespace NS`: CA, serving certificate and the manifests that
carry them.

Writes ca.crt, ca.key, tls.crt, tls.key, secret.yaml (the kubernetes.io/tls Secret the
Deployment mounts), webhook-configurations.yaml (with the caBundle) and, when the kustomize
base is found, kustomization.yaml so that `kubectl apply -k DIR` deploys everything at once.
Running it again re-issues the serving certificate from the same CA (the caBundle stays
valid); `--renew-ca` starts a new CA.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from certs import atomic, generate, render


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m certs",
                                description="CA, serving certificate and the manifests that carry them.")
    p.add_argument("--out", type=Path, help="directory to write into (created if missing); required")
    p.add_argument("--namespace", default=render.NAMESPACE, help="namespace of the webhook Service")
    p.add_argument("--extra-san", action="append", default=[], metavar="NAME",
                   help="another DNS name or IP address for the serving certificate (repeatable)")
    p.add_argument("--days", type=int, default=generate.SERVING_DAYS, help="serving certificate lifetime")
    p.add_argument("--renew-ca", action="store_true", help="create a new CA even if DIR has one")
    p.add_argument("--base", type=Path, default=Path("manifests"),
                   help="the kustomize base to reference from DIR/kustomization.yaml (default manifests/)")
    p.add_argument("--print-base-webhooks", action="store_true",
                   help="print the webhook configurations without caBundle (manifests/ holds this) and exit")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    if args.print_base_webhooks:
        sys.stdout.write(render.dump(render.webhook_configurations()))
        return 0
    if args.out is None:
        print("python -m certs: --out DIR is required", file=sys.stderr)
        return 2
    try:
        bundle = generate.write_bundle(args.out, args.namespace, extra_names=args.extra_san,
                                       renew_ca=args.renew_ca, days=args.days)
        docs = render.webhook_configurations(args.namespace, bundle.ca_pem)
        atomic.write_public(args.out / "webhook-configurations.yaml", render.dump(docs).encode())
        secret = render.secret(args.namespace, bundle.ca_pem, bundle.cert_pem, bundle.key_pem)
        atomic.write_private(args.out / "secret.yaml", render.dump([secret]).encode())
        written = ["ca.crt", "ca.key", "tls.crt", "tls.key", "secret.yaml", "webhook-configurations.yaml"]
        if (args.base / "kustomization.yaml").exists():
            base = os.path.relpath(args.base.resolve(), args.out.resolve())
            atomic.write_public(args.out / "kustomization.yaml",
                                  render.dump([render.kustomization(base, args.namespace)]).encode())
            written.append("kustomization.yaml")
    except (OSError, ValueError) as err:
        print(f"python -m certs: {err}", file=sys.stderr)
        return 2
    ca = "new CA" if bundle.new_ca else "existing CA"
    print(f"wrote {', '.join(written)} to {args.out} ({ca}, namespace {args.namespace})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
