"""Plain helpers of the input tests (no tests here): a NodeOverlay as YAML text, files of any bytes, and
`check --format json` run in process against the small fixture catalog."""

from __future__ import annotations

import io
import json
import pathlib
from typing import Any

from lint import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
CATALOG = str(ROOT / "tests" / "lint_fixtures" / "catalog.yaml")

OVERLAY = """\
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: {name}
spec:
  weight: {weight}
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: [spot]
  priceAdjustment: "-10%"
"""


def run(*args: str, stdin: bytes | None = None) -> tuple[int, dict[str, Any], str]:
    """`check --format json` against the small fixture catalog."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["check", *args, "--catalog", CATALOG, "--format", "json"],
                    stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return code, (json.loads(out.getvalue()) if out.getvalue() else {}), err.getvalue()


def write(tmp_path: pathlib.Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


# A Helm template of an overlay: what a chart in a GitOps repository holds, never valid YAML as it stands.
HELM_TEMPLATE = """\
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: {{ .Release.Name }}-discount
spec:
  weight: {{ .Values.weight }}
  requirements: []
  priceAdjustment: {{ .Values.adjustment | quote }}
"""
