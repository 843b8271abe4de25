"""Which CRDs the e2e API server serves.

Scenarios run with Karpenter's own NodeOverlay, NodePool and NodeClaim CRDs (hack/karpenter-crds.sh, the
sigs.k8s.io/karpenter module from the Go module proxy), as a real cluster does. The DRA scenarios ask
for the project's extended NodeOverlay CRD with the `dra_crd` fixture, which installs it with the
opt-in command of docs/webhook.md; every other scenario gets Karpenter's back first. A swap is over only when the
API server's validation shows it (CRD updates reach the request handlers asynchronously).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests import tools

from . import _readme
from ._cluster import ControlPlane, ControlPlaneError

KARPENTER = "karpenter"
DRA = "dra"
KARPENTER_FILES = ("karpenter.sh_nodeoverlays.yaml", "karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml")
NAMES = ("crd/nodeoverlays.karpenter.sh", "crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh")
# docs/webhook.md's opt-in block, run as written (tests/e2e/_readme.py).
DRA_BLOCK = "install-dra-crd"
SWAP_TIMEOUT = 60.0
UNKNOWN_DRA_FIELD = 'unknown field "spec.dynamicResources"'


def _probe() -> str:
    # Cluster-scoped, matches no NodePool, never persisted (dry run).
    return json.dumps({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "e2e-crd-probe"},
        "spec": {"requirements": [], "dynamicResources": {"resourceSliceTemplates": []}}})


class Crds:
    """The NodeOverlay CRD in effect; `use` swaps only when the wanted one is not already served."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.karpenter_dir: Path = tools.karpenter_crds()
        self.current = ""

    def use(self, which: str) -> None:
        if which == self.current:
            return
        if which == KARPENTER:
            files = [str(self.karpenter_dir / f) for f in KARPENTER_FILES]
            # kubectl's default field manager, as in the documented opt-in command: applying one CRD
            # removes every field only the other defines.
            self.plane.kubectl("apply", "--server-side", "--force-conflicts", *(a for f in files for a in ("-f", f)))
        elif which == DRA:
            _readme.run(self.plane, DRA_BLOCK)
        else:
            raise ValueError(which)
        self.plane.kubectl("wait", "--for=condition=Established", *NAMES, "--timeout=60s")
        self._wait_served(which)
        self.current = which

    def _wait_served(self, which: str) -> None:
        deadline = time.monotonic() + SWAP_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            done = self.plane.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-",
                                      input=_probe(), check=False)
            last = done.stderr
            if (UNKNOWN_DRA_FIELD in done.stderr) == (which == KARPENTER):
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"the API server never served the {which} NodeOverlay CRD; last probe: {last}")

    def served_schema(self) -> dict[str, object]:
        crd = json.loads(self.plane.kubectl("get", "crd", "nodeoverlays.karpenter.sh", "-o", "json").stdout)
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])
