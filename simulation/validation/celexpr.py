"""CEL expressions as the Kubernetes API server evaluates a CRD's rules, through the `cel` library
(PyPI common-expression-language: Rust's cel crate). This module is the only one that knows the
library: it compiles an expression, evaluates it with the Kubernetes extension functions a CRD rule
may call, and turns the library's exceptions into values. Chosen over cel-python (pure Python, about
30 times slower per rule, and its int() accepts " 5", "1_000" and non-ASCII digits, which Go's
strconv.ParseInt refuses) and cel-expr-python (C++ cel-cpp: a 50 MB wheel whose int() accepts " 5");
benchmarks/schema_bench.py measures what the rules cost."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import re2

# The library's package imports its interactive command line (`cel.cli`: prompt_toolkit, pygments), a fifth of a
# second at start-up that a linter run in a pre-commit hook pays on every commit and that nothing here uses. An empty
# module stands in for it; `from . import cli` in the package then finds it (tests/test_startup.py keeps the
# prompt library out).
sys.modules.setdefault("cel.cli", types.ModuleType("cel.cli"))

import cel  # noqa: E402
import cel.stdlib  # noqa: E402

# The CEL standard functions the library implements itself; operators (`_+_`, `@in`, `!_`) are all built in.
_STANDARD = frozenset({
    "size", "int", "uint", "double", "string", "bytes", "bool", "type", "dyn", "timestamp", "duration",
    "contains", "startsWith", "endsWith", "matches", "getDate", "getDayOfMonth", "getDayOfWeek",
    "getDayOfYear", "getFullYear", "getHours", "getMilliseconds", "getMinutes", "getMonth", "getSeconds",
})


@functools.cache
def regex(pattern: str) -> Any:
    # RE2, the engine of Go's regexp that the API server uses (Python's re differs, e.g. on `$`).
    return re2.compile(pattern)


def _find(text: str, pattern: str) -> str:
    found = regex(pattern).search(text)
    return "" if found is None else str(found.group(0))


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [str(m.group(0)) for m in regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(items))


def _index_of(value: Any, item: Any, *offset: int) -> int:
    # One name for the strings extension's and the Kubernetes list library's indexOf.
    if isinstance(value, str):
        return int(cel.stdlib.index_of(value, item, *offset))
    return next((i for i, x in enumerate(value) if x == item), -1)


def _last_index_of(value: Any, item: Any, *offset: int) -> int:
    if isinstance(value, str):
        return int(cel.stdlib.last_index_of(value, item, *offset))
    return next((i for i in range(len(value) - 1, -1, -1) if value[i] == item), -1)


def _extensions() -> dict[str, Callable[..., Any]]:
    """The Kubernetes CEL libraries the API server offers CRD rules, as far as they are implemented here:
    regex (find, findAll), lists (isSorted, sum, min, max, indexOf, lastIndexOf), cel-go's strings and sets
    extensions. Quantity, URL, IP/CIDR, format and semver are not: a rule calling them is not evaluated."""
    library = cel.stdlib.EXTENSIONS
    functions: dict[str, Callable[..., Any]] = {**library["strings"], **library["sets"]}
    functions.update({name: library["core"][name] for name in ("sum", "min", "max")})
    functions.update(find=_find, findAll=_find_all, isSorted=_is_sorted, indexOf=_index_of,
                     lastIndexOf=_last_index_of)
    return functions


EXTENSIONS: Mapping[str, Callable[..., Any]] = _extensions()


class CompileError(ValueError):
    """An expression the library cannot parse."""


@dataclasses.dataclass(frozen=True)
class Expression:
    source: str
    program: Any = dataclasses.field(compare=False, repr=False)
    # Every identifier it reads, comprehension variables included.
    variables: frozenset[str]
    # The extension functions it calls: only these are handed to each evaluation.
    functions: Mapping[str, Callable[..., Any]] = dataclasses.field(compare=False, repr=False)
    # Functions neither CEL nor this module implements: the expression cannot be evaluated faithfully.
    unsupported: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Failure:
    """An evaluation error (no such key, a bad int() conversion, an overflow), which rejects an object."""

    message: str


def compile_expression(source: str) -> Expression:
    try:
        program = cel.compile(source)
    except (ValueError, RuntimeError) as error:
        raise CompileError(str(error).splitlines()[0]) from error
    called = [f for f in program.functions() if f[0].isalpha()]
    return Expression(
        source, program, frozenset(program.variables()),
        {f: EXTENSIONS[f] for f in called if f in EXTENSIONS},
        tuple(f for f in called if f not in EXTENSIONS and f not in _STANDARD))


class Scope:
    """Variables converted to CEL values once, for several evaluations (converting a large value costs more
    than evaluating most rules on it)."""

    def __init__(self, bindings: Mapping[str, Any], expressions: Iterable[Expression]) -> None:
        functions: dict[str, Callable[..., Any]] = {}
        for expression in expressions:
            functions.update(expression.functions)
        self._context = cel.Context(functions=functions)
        # A value the library cannot convert makes every evaluation that reads it fail, never the caller.
        self._unconverted: dict[str, Failure] = {}
        for name, value in bindings.items():
            self.bind(name, value)

    def bind(self, name: str, value: Any) -> None:
        self._unconverted.pop(name, None)
        try:
            self._context.add_variable(name, value)
        except ValueError as error:
            self._unconverted[name] = Failure(_describe(error))

    def run(self, expression: Expression) -> Any:
        """The expression's value, or a Failure."""
        unconverted = [f for name, f in self._unconverted.items() if name in expression.variables]
        if unconverted:
            return unconverted[0]
        try:
            return expression.program.execute(self._context)
        except Exception as error:  # the library reports evaluation errors with many types
            return Failure(_describe(error))


def evaluate(expression: Expression, bindings: Mapping[str, Any]) -> Any:
    return Scope(bindings, (expression,)).run(expression)


def _describe(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"no such key: {error.args[0] if error.args else ''}"
    return str(error).splitlines()[0] if str(error) else type(error).__name__
