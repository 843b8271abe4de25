"""`python -m webhook.demo` (used by `make run`): writes an AdmissionReview that the webhook,
started on the same `--state`, will deny, and prints the curl that sends it.

The candidate is a copy of an overlay from the state under a new name with a different price
at the same weight: a same-weight conflict whatever the example files contain. The core
confirms the denial before anything is printed.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulation import evaluate as ev
from simulation.semantics import model
from webhook import loader, review


def conflicting(objects: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ev.Report] | None:
    catalog = loader.load_catalog(None)
    prepared = ev.prepare([ev.Document(o, i, False) for i, o in enumerate(objects)], catalog)
    for obj in sorted((o for o in objects if model.kind_of(o) == model.NODEOVERLAY),
                      key=lambda o: model.name_of(o) or ""):
        spec = obj.get("spec")
        if not isinstance(spec, Mapping) or not ("price" in spec or "priceAdjustment" in spec):
            continue
        new_spec = {k: copy.deepcopy(v) for k, v in spec.items() if k != "priceAdjustment"}
        new_spec["price"] = "0.001"
        candidate = {"apiVersion": model.OVERLAY_API, "kind": model.NODEOVERLAY,
                     "metadata": {"name": f"{model.name_of(obj)}-duplicate"}, "spec": new_spec}
        report = ev.evaluate([ev.Document(candidate, 0)], prepared)
        if any(f.code == "same-weight-conflict" for f in report.errors()):
            return candidate, report
    return None


def admission_review(candidate: Mapping[str, Any]) -> dict[str, Any]:
    gvk = {"group": review.GROUP, "version": "v1alpha1", "kind": model.NODEOVERLAY}
    gvr = {"group": review.GROUP, "version": "v1alpha1", "resource": "nodeoverlays"}
    return {"apiVersion": review.API_VERSION, "kind": review.KIND, "request": {
        "uid": str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": model.name_of(candidate), "operation": "CREATE",
        "userInfo": {"username": "demo", "groups": ["system:authenticated"]},
        "object": candidate, "oldObject": None, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m webhook.demo")
    p.add_argument("--certs", type=Path, required=True, help="the directory `python -m certs` wrote")
    p.add_argument("--state", type=Path, nargs="+", required=True)
    p.add_argument("--port", type=int, default=9443)
    try:
        args = p.parse_args(argv)
        found = conflicting(loader.state_objects(args.state))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    except loader.LoadError as err:
        print(f"webhook.demo: {err}", file=sys.stderr)
        return 2
    if found is None:
        print("webhook.demo: no overlay with a price in the state to conflict with", file=sys.stderr)
        return 1
    candidate, report = found
    out = args.certs / "review.json"
    out.write_text(json.dumps(admission_review(candidate), indent=2) + "\n")
    other = next(f for f in report.errors() if f.code == "same-weight-conflict")
    print(f"# {out}: CREATE NodeOverlay {model.name_of(candidate)}; the core says: {other.message[:160]}")
    print("# Once the webhook below logs \"ready\", paste this in another terminal to see the denial:")
    print(f"curl -sS --cacert {args.certs / 'ca.crt'} -H 'Content-Type: application/json' "
          f"--data @{out} https://localhost:{args.port}/validate | python3 -m json.tool")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
