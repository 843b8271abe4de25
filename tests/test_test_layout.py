"""The test suite's own layout: shared fixtures in conftest.py, plain helpers in modules tests import,
and no test module importing another (a helper there would be collected, run and edited as a test)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (`test_*`) a file imports, however spelled."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.rsplit(".", 1)[-1].startswith("test_")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.rsplit(".", 1)[-1].startswith("test_"):
                found.append(module)
            found += [f"{module}.{a.name}" for a in node.names if a.name.startswith("test_")]
    return found


def test_no_test_module_imports_another() -> None:
    offenders = {str(p.relative_to(TESTS)): imported_test_modules(p) for p in sorted(TESTS.rglob("test_*.py"))}
    assert {p: m for p, m in offenders.items() if m} == {}


def test_the_check_sees_every_spelling(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text("import tests.test_a\nfrom tests import test_b, tools\nfrom tests.test_c import x\n"
                      "from . import test_d\nfrom tests import webhook_support\n")
    assert imported_test_modules(sample) == ["tests.test_a", "tests.test_b", "tests.test_c", ".test_d"]
