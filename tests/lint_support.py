"""Plain helpers of the overlay-lint tests (no tests here): objects and files, and the CLI run in process
against the small fixture catalog."""

from __future__ import annotations

import io
import json
import pathlib
from typing import Any

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
