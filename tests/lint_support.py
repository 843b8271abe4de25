"""Plain helpers of the overlay-lint tests (no tests here): objects and files, the CLI run in process
against the small fixture catalog, and a fake API server speaking the list API (the `fake_cluster`
fixture of conftest.py serves it)."""

from __future__ import annotations

import collections.abc
import contextlib
import http.server
import io
import json
import pathlib
import threading
import urllib.parse
from typing import Any, ClassVar

from lint import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "lint_fixtures"
CATALOG = str(FIXTURES / "catalog.yaml")
BASIC = str(FIXTURES / "basic")
VENV_BIN = ROOT / ".venv" / "bin"


def overlay(name: str, weight: int = 10, *, adjustment: str = "-10%", family: str | None = None,
            operator: str = "In") -> dict[str, Any]:
    reqs: list[dict[str, Any]] = [
        {"key": "karpenter.sh/capacity-type", "operator": operator, "values": ["spot"]}]
    if family:
        reqs.append({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]})
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": weight, "requirements": reqs, "priceAdjustment": adjustment}}


def nodepool(name: str, weight: int = 10) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"weight": weight, "template": {"spec": {"requirements": []}}}}


def write(tmp_path: pathlib.Path, name: str, *objects: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text("\n---\n".join(json.dumps(o) for o in objects), encoding="utf-8")
    return str(path)


def run(*args: str, stdin: bytes | None = None, catalog: bool = True) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = [*args, "--catalog", CATALOG] if catalog else list(args)
    code = cli.main(argv, stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def codes(output: str) -> list[str]:
    return [f["code"] for f in json.loads(output)["findings"]]


class FakeApi(http.server.BaseHTTPRequestHandler):
    pages: ClassVar[collections.abc.Mapping[str, list[dict[str, Any]]]] = {}
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        self.requests.append(self.path)
        assert self.headers.get("Authorization") == "Bearer t0ken"
        pages = self.pages.get(url.path)
        if pages is None:
            self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
            return
        index = int(query.get("continue", ["0"])[0])
        body = dict(pages[index])
        if index + 1 < len(pages):
            body["metadata"] = {"continue": str(index + 1)}
        self._send(200, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


Cluster = tuple[str, type[FakeApi]]


@contextlib.contextmanager
def fake_api(tmp_path: pathlib.Path) -> collections.abc.Iterator[Cluster]:
    """A fake API server and a kubeconfig whose context `fake` reaches it (the current one, `dead`, does not)."""
    handler = type("Handler", (FakeApi,), {"pages": {}, "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}},
                     {"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}},
                     {"name": "dead", "context": {"cluster": "dead", "user": "u"}}],
    }))
    try:
        yield str(kubeconfig), handler
    finally:
        server.shutdown()
        server.server_close()
