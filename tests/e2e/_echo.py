"""benchmarks/echo.py on loopback: a webhook that answers at once, registered exactly as the guard is
(Guard.route_to), the floor any webhook pays for the API server's calls."""

from __future__ import annotations

import http.client
import sys
import urllib.request

from . import _cluster
from ._cluster import LOOPBACK, REPO_ROOT, ControlPlane
from ._guard import Certs, Served


class Echo(Served):
    """`name`, `url` and `admissions` let Guard register it like one webhook; the guard's serving
    certificate, so the configurations' caBundle fits it too."""

    def __init__(self, plane: ControlPlane, certs: Certs, name: str = "echo") -> None:
        super().__init__(plane, certs, name)

    def admissions(self) -> float:
        with urllib.request.urlopen(f"{self.url}/admissions", timeout=5, context=self._tls) as resp:
            return float(resp.read().decode())

    def _answers(self) -> bool:
        try:
            self.admissions()
        except (OSError, http.client.HTTPException, ValueError):
            return False
        return True

    def start(self) -> None:
        argv = [sys.executable, "-m", "benchmarks.echo", "--host", LOOPBACK, "--port", str(self.port),
                "--tls-cert-file", str(self.certs.cert), "--tls-private-key-file", str(self.certs.key)]
        # benchmarks/ is not an installed package: it is found from the checkout.
        self.proc = _cluster._spawn(argv, self.log_path, {"PYTHONPATH": str(REPO_ROOT)})
        _cluster._wait_until(self._answers, self.proc, f"echo {self.name}", self.log_path, 30.0)
