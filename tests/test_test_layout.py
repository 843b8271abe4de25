"""The test suite's own layout: shared fixtures in conftest.py, plain helpers in modules tests import,
and no test module importing another (a helper there would be collected, run and edited as a test)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_test_modules(path: Path) -> list[str]:
    """The suite's test modules (`test_*` under tests/) a file imports, however spelled; a library's own
    (`aiohttp.test_utils`) is not one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _ours(a.name, 0) and a.name.rsplit(".", 1)[-1].startswith("test_")]
        elif isinstance(node, ast.ImportFrom) and _ours(node.module or "", node.level):
            module = node.module or ""
            if module.rsplit(".", 1)[-1].startswith("test_"):
                found.append(module)
            found += [f"{module}.{a.name}" for a in node.names if a.name.startswith("test_")]
    return found


def _ours(module: str, level: int) -> bool:
    """Whether an import names a module of the suite: relative, spelled from the `tests` package, or a bare
    name of a module in it (tests/ on the path)."""
    top = module.split(".", 1)[0]
    return level > 0 or top == "tests" or (TESTS / f"{top}.py").exists() or (TESTS / top).is_dir()


def test_no_test_module_imports_another() -> None:
    offenders = {str(p.relative_to(TESTS)): imported_test_modules(p) for p in sorted(TESTS.rglob("test_*.py"))}
    assert {p: m for p, m in offenders.items() if m} == {}


def test_the_check_sees_every_spelling(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text("import tests.test_a\nfrom tests import test_b, tools\nfrom tests.test_c import x\n"
                      "from . import test_d\nfrom tests import webhook_support\nimport test_merge\n"
                      "from aiohttp.test_utils import TestClient\nimport pytest.test_x\n")
    assert imported_test_modules(sample) == ["tests.test_a", "tests.test_b", "tests.test_c", ".test_d", "test_merge"]
