"""docs/design.md's module tables (§2) against the tree: every module they name exists, and every module of the
packages they describe is named, so the document stays true to the code as modules come and go."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
# §2.1-§2.4: the package each table describes, and the prefix its rows may leave out.
SECTIONS = {"2.1": "simulation", "2.2": "sources", "2.3": "lint", "2.4": "webhook"}


def _section(text: str, number: str) -> str:
    start = text.index(f"\n### {number} ")
    end = text.find("\n### ", start + 1)
    return text[start:end if end != -1 else len(text)]


def _named(section: str) -> set[str]:
    """The modules the section's table rows name in their first column (`a.py`, `b.py` or `dir/c.py`)."""
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([\w/]+\.py)`", row)}


def _tree(package: str) -> set[str]:
    base = ROOT / package
    return {str(p.relative_to(base)) for p in base.rglob("*.py") if p.name != "__init__.py"}


def test_design_module_tables_match_the_tree() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    for number, package in SECTIONS.items():
        named, tree = _named(_section(text, number)), _tree(package)
        assert named - tree == set(), f"§{number} names modules {package}/ lacks"
        assert tree - named == set(), f"§{number} leaves out modules of {package}/"
