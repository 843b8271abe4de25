"""Plain helpers of the overlay-lint tests (no tests here): objects and files, the CLI run in process
against the small fixture catalog, and a fake API server speaking the list API (the `fake_cluster`
fixture of conftest.py serves it)."""

from __future__ import annotations

import collections.abc
import contextlib
import http.server
import io
import json
import os
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
GOLDEN = ROOT / "tests" / "golden"
UPDATE_GOLDENS = os.environ.get("OVERLAY_GUARD_UPDATE_GOLDENS") == "1"


def matches_golden(name: str, output: str) -> bool:
    """Whether `output` is tests/golden/NAME (rewritten first when OVERLAY_GUARD_UPDATE_GOLDENS=1)."""
    path = GOLDEN / name
    if UPDATE_GOLDENS:
        path.write_text(output, encoding="utf-8")
    return output == path.read_text(encoding="utf-8")


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


class _JsonHandler(http.server.BaseHTTPRequestHandler):
    """A fake API's answers: JSON bodies, and no request log on stderr."""

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class FakeApi(_JsonHandler):
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


class FakeForge(_JsonHandler):
    """GitHub's and GitLab's comment APIs, as far as `lint.prcomment` uses them: list (paged), create, edit.
    It checks every request's path, token and body; `denied` answers 403 to everything; `log` records
    (method, path) in order."""

    token: ClassVar[str] = "s3cret"
    comments: ClassVar[dict[str, dict[int, str]]] = {}  # list path -> comment id -> body
    log: ClassVar[list[tuple[str, str]]] = []
    denied: ClassVar[bool] = False

    def _authorised(self) -> bool:
        given = self.headers.get("Authorization") or f"Bearer {self.headers.get('PRIVATE-TOKEN')}"
        return given == f"Bearer {self.token}" and not self.denied

    def _body(self) -> str:
        data = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        assert set(data) == {"body"} and isinstance(data["body"], str)
        assert self.headers.get("Content-Type") == "application/json"
        return str(data["body"])

    def _route(self, method: str) -> None:
        url = urllib.parse.urlparse(self.path)
        self.log.append((method, url.path))
        if not self._authorised():
            self._send(403, {"message": "Resource not accessible by integration"})
            return
        parent, _, last = url.path.rpartition("/")
        if method == "GET" and url.path in self.comments:
            page = int(urllib.parse.parse_qs(url.query)["page"][0])
            per_page = int(urllib.parse.parse_qs(url.query)["per_page"][0])
            items = [{"id": i, "body": b} for i, b in sorted(self.comments[url.path].items())]
            self._send(200, items[(page - 1) * per_page:page * per_page])
        elif method == "POST" and url.path in self.comments:
            new_id = 1000 + sum(len(c) for c in self.comments.values())
            self.comments[url.path][new_id] = self._body()
            self._send(201, {"id": new_id})
        elif method in ("PATCH", "PUT") and last.isdigit():
            home = next((c for path, c in self.comments.items()
                         if int(last) in c and (parent == path or parent.endswith("/issues/comments"))), None)
            if home is None:
                self._send(404, {"message": "Not Found"})
                return
            home[int(last)] = self._body()
            self._send(200, {"id": int(last)})
        else:
            self._send(404, {"message": "Not Found"})

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_PUT(self) -> None:
        self._route("PUT")



@contextlib.contextmanager
def fake_forge(lists: collections.abc.Sequence[str]) -> collections.abc.Iterator[tuple[str, type[FakeForge]]]:
    """A FakeForge on 127.0.0.1 whose comment lists live at `lists`: (base URL, handler class)."""
    handler = type("Forge", (FakeForge,), {"comments": {path: {} for path in lists}, "log": [], "denied": False})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler
    finally:
        server.shutdown()
        server.server_close()
