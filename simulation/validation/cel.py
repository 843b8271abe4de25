"""A CRD's x-kubernetes-validations rules, compiled once per CRD and evaluated as the API server does:
`self` is the value at the rule's place in the schema, a rule that is false or fails to evaluate rejects
the object with the rule's message (or messageExpression) at the rule's place (or its fieldPath).

Two refinements name a more precise field than the API server does, so that a finding's line points at
the culprit. Both follow from the form of a rule, never from what it checks: a rule `self.all(v, body)`
is reported at each element (or map key) whose body fails, and a rule `!has(self.f)` at field `f`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from simulation import memo
from simulation.memo import Memo
from simulation.validation import celexpr

Path = tuple[str | int, ...]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# `.field`, and whether a call follows (then it is a method or macro, not a field).
_FIELD = re.compile(rf"\s*\.\s*({_IDENT})\s*(\()?")
_MACRO = re.compile(rf"\s*\.\s*(?:all|exists|exists_one|filter|map)\s*\(\s*({_IDENT})\s*,")
_FIELD_PATH_STEP = re.compile(rf"\.({_IDENT})|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


class Violation(NamedTuple):
    """Where a rule fails, relative to the value it validates, and what the API server would say."""

    at: Path
    message: str
    # The rule could not be evaluated (no such key, a bad conversion) rather than being false.
    error: bool = False


@dataclasses.dataclass(frozen=True)
class Rule:
    text: str
    message: str
    whole: celexpr.Expression
    message_expression: celexpr.Expression | None = None
    field_path: Path = ()
    # `self.all(v, body)`: v and body, to name the failing elements.
    each: tuple[str, celexpr.Expression] | None = None
    # `!has(self.f)`: the field whose presence breaks the rule.
    forbids: str | None = None
    # The only fields of `self` the rule reads, when it reads nothing else of it: the rest need not be
    # converted to CEL values, which is most of an evaluation's cost for a large object.
    reads: frozenset[str] | None = None
    # For `self.all(v, body)` on a list: the only fields of its elements the rule reads, or None. Each
    # comprehension step copies its element, so a rule comparing elements pairwise costs as much as the
    # elements are large.
    element_reads: frozenset[str] | None = None
    # Why the guard does not evaluate the rule, or None.
    skipped: str | None = None


def compile_rule(raw: Mapping[str, Any]) -> Rule:
    text = str(raw.get("rule", ""))
    message = str(raw.get("message") or "").strip() or f"failed rule: {text}"
    try:
        whole = celexpr.compile_expression(text)
    except celexpr.CompileError as error:
        placeholder = celexpr.Expression(text, None, frozenset(), {})
        return Rule(text, message, placeholder, skipped=f"does not compile: {error}")
    skipped = None
    if "oldSelf" in whole.variables:
        # A transition rule runs only when an update changes an existing value; the guard's checks are of
        # one version of an object, which is what the API server validates on create.
        skipped = "is a transition rule (it reads oldSelf)"
    elif whole.unsupported:
        skipped = f"calls {', '.join(whole.unsupported)}, which the guard does not implement"
    return Rule(text, message, whole, _message_expression(raw), _field_path(raw.get("fieldPath")),
                _each(text), _forbids(text), _fields_read(text), _element_fields_read(text), skipped)


def _message_expression(raw: Mapping[str, Any]) -> celexpr.Expression | None:
    source = raw.get("messageExpression")
    if not isinstance(source, str) or not source.strip():
        return None
    try:
        return celexpr.compile_expression(source)
    except celexpr.CompileError:
        return None


def _field_path(text: Any) -> Path:
    if not isinstance(text, str):
        return ()
    steps: list[str | int] = []
    position = 0
    while position < len(text):
        step = _FIELD_PATH_STEP.match(text, position)
        if step is None:
            return ()  # the API server refuses such a CRD; the rule's own place is the best answer
        steps.append(next(g for g in step.groups() if g is not None))
        position = step.end()
    return tuple(steps)


def _each(text: str) -> tuple[str, celexpr.Expression] | None:
    head = re.match(rf"\s*self\s*\.\s*all\s*\(\s*({_IDENT})\s*,", text)
    if head is None or _closing_paren(text, text.index("(", head.start())) != len(text.rstrip()) - 1:
        return None
    try:
        body = celexpr.compile_expression(text[head.end():len(text.rstrip()) - 1])
    except celexpr.CompileError:
        return None
    return head.group(1), body


def _forbids(text: str) -> str | None:
    found = re.fullmatch(rf"\s*!\s*has\s*\(\s*self\s*\.\s*({_IDENT})\s*\)\s*", text)
    return found.group(1) if found else None


def _fields_read(text: str) -> frozenset[str] | None:
    """The fields of `self` that `text` reads, when it reads nothing else of `self`; else None."""
    fields: set[str] = set()
    for at in _identifier(text, "self"):
        access = _FIELD.match(text, at + len("self"))
        if access is None or access.group(2):  # `self` whole, or a method or macro call on it
            return None
        fields.add(access.group(1))
    return frozenset(fields)


def _element_fields_read(text: str) -> frozenset[str] | None:
    """The fields of the elements of list `self` that `text` reads, when it reads them only through
    variables of macros on `self` (`self.all(x, x.a)`, `self.exists_one(y, y.b)`); else None."""
    names: set[str] = set()
    declared: set[int] = set()
    for at in _identifier(text, "self"):
        macro = _MACRO.match(text, at + len("self"))
        if macro is None:
            return None
        names.add(macro.group(1))
        declared.add(macro.start(1))
    fields: set[str] = set()
    for name in names:
        for at in _identifier(text, name):
            access = _FIELD.match(text, at + len(name))
            if at in declared:
                continue
            if access is None or access.group(2):
                return None
            fields.add(access.group(1))
    return frozenset(fields)


def _identifier(text: str, name: str) -> Iterator[int]:
    """Where identifier `name` stands in `text` (not as a field name, not inside a literal)."""
    for at in _code_positions(text):
        if text.startswith(name, at) and not re.match(r"[A-Za-z0-9_]", text[at + len(name):at + len(name) + 1]) \
                and (at == 0 or not re.match(r"[A-Za-z0-9_.]", text[at - 1])):
            yield at


def _code_positions(text: str) -> Iterator[int]:
    """Every index of `text` outside string literals and comments."""
    i = 0
    while i < len(text):
        if text[i] in "'\"":
            i = _string_end(text, i)
        elif text.startswith("//", i):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline
        else:
            yield i
            i += 1


def _closing_paren(text: str, start: int) -> int:
    """Index of the parenthesis closing the one at `start`, outside string literals and comments; -1 if none."""
    depth = 0
    for i in _code_positions(text[start:]):
        depth += {"(": 1, ")": -1}.get(text[start + i], 0)
        if depth == 0:
            return start + i
    return -1


def _string_end(text: str, start: int) -> int:
    quote = text[start] * 3 if text.startswith(text[start] * 3, start) else text[start]
    raw = start > 0 and text[start - 1] in "rR"
    i = start + len(quote)
    while i < len(text):
        if text[i] == "\\" and not raw:
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        i += 1
    return len(text)


@dataclasses.dataclass(frozen=True)
class RuleSet:
    """The rules at one place in the schema, evaluated together so that `self` is converted once."""

    rules: tuple[Rule, ...]
    reads: frozenset[str] | None = None
    # The `self.all(v, body)` rules whose body reads v alone, and the fields of the elements they read (None:
    # any). Such verdicts depend on the element alone, and elements (requirements, names, keys) recur across
    # objects: they are remembered per element, for all these rules at once.
    elementwise: tuple[tuple[Rule, str, celexpr.Expression], ...] = ()
    element_reads: frozenset[str] | None = None
    # The rest of the rules the guard evaluates, on the value as a whole.
    others: tuple[Rule, ...] = ()
    # Per value the rules judge whole (see violations), and per element: the failing rules and their outcomes.
    memo: Memo[tuple[tuple[Rule, Any], ...]] = dataclasses.field(default_factory=Memo, compare=False, repr=False)
    element_memo: Memo[tuple[tuple[Rule, Any], ...]] = dataclasses.field(
        default_factory=Memo, compare=False, repr=False)

    @classmethod
    def of(cls, raw_rules: Iterable[Mapping[str, Any]]) -> RuleSet:
        rules = tuple(compile_rule(r) for r in raw_rules if isinstance(r, Mapping))
        active = [r for r in rules if r.skipped is None]
        elementwise = tuple((r, *r.each) for r in active if r.each is not None and "self" not in r.each[1].variables)
        rest = tuple(r for r in active if all(r is not e for e, _, _ in elementwise))
        return cls(rules, _union(r.reads for r in active), elementwise,
                   _union(r.element_reads for r, _, _ in elementwise), rest)


def _union(fields: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    out: frozenset[str] | None = frozenset()
    for more in fields:
        out = None if out is None or more is None else out | more
    return out


def violations(rule_set: RuleSet, value: Any) -> Sequence[Violation]:
    """Where the rules at a place in the schema holding `value` reject it."""
    if isinstance(value, str | int | float | bool) or (rule_set.reads is not None and isinstance(value, dict)):
        # Most places of most objects (a requirement's key, the spec's price fields): a memo lookup and no
        # generator, the rules' verdict on an equal value found (or worked out) once.
        found = _remembered(rule_set, _pruned(value, rule_set.reads))
        return [_violation(rule, value, outcome) for rule, outcome in found] if found else ()
    return list(_judged(rule_set, value))


def _judged(rule_set: RuleSet, value: Any) -> Iterator[Violation]:
    scope: celexpr.Scope | None = None
    listed = isinstance(value, list | dict)
    if listed and rule_set.elementwise:
        yield from _elementwise(rule_set, value)
    for rule in rule_set.others if listed else (r for r in rule_set.rules if r.skipped is None):
        if rule.each is not None and listed:
            yield from _each_violations(rule, rule.each, value)
            continue
        if scope is None:
            scope = celexpr.Scope({"self": value}, [r.whole for r in rule_set.rules if r.skipped is None])
        outcome = scope.run(rule.whole)
        if outcome is not True:
            yield _violation(rule, value, outcome)


def _violation(rule: Rule, value: Any, outcome: Any) -> Violation:
    at = rule.field_path or ((rule.forbids,) if rule.forbids else ())
    return Violation(at, _message(rule, value, outcome), isinstance(outcome, celexpr.Failure))


def _remembered(rule_set: RuleSet, judged: Any) -> tuple[tuple[Rule, Any], ...]:
    """The failing rules and their outcomes on a scalar, or on the few fields of a map the rules read. Such
    values recur across objects (most overlays set neither price nor priceAdjustment, or the same ones, and
    requirement keys repeat): the answer is remembered per value."""
    return _recall(rule_set.memo, judged, lambda v: [
        (r, celexpr.evaluate(r.whole, {"self": v})) for r in rule_set.rules if r.skipped is None])


def _recall(store: Memo[tuple[tuple[Rule, Any], ...]], judged: Any,
            evaluate: Callable[[Any], Iterable[tuple[Rule, Any]]]) -> tuple[tuple[Rule, Any], ...]:
    """The failing rules among `evaluate(judged)`, remembered (unless `judged` is too large to keep)."""
    return memo.known(store, memo.key(judged), judged, _failing(evaluate))


def _failing(evaluate: Callable[[Any], Iterable[tuple[Rule, Any]]]) \
        -> Callable[[Any], tuple[tuple[Rule, Any], ...]]:
    """The failing rules among `evaluate(value)`, as a memo keeps them: only the verdict and an error's text."""
    return lambda v: tuple((r, o if isinstance(o, celexpr.Failure) else False) for r, o in evaluate(v) if o is not True)


def _elementwise(rule_set: RuleSet, value: list[Any] | dict[str, Any]) -> Iterator[Violation]:
    """The rule set's elementwise rules: `self.all(v, body)` holds where body holds for every element (every
    key of a map), and each element for which it fails is reported."""
    listed = isinstance(value, list)

    def evaluate(judged: Any) -> list[tuple[Rule, Any]]:
        rules = rule_set.elementwise
        if all(body.variables <= {name} for _, name, body in rules):
            # Each body reads its own variable alone: one scope with the element converted once serves them all
            # (a scope per rule converted it per rule, most of a new element's cost).
            scope = celexpr.Scope({name: judged for _, name, _ in rules}, [body for _, _, body in rules])
            return [(r, scope.run(body)) for r, _, body in rules]
        return [(r, celexpr.evaluate(body, {name: judged})) for r, name, body in rules]

    def judged(element: Any) -> Iterable[tuple[Rule, Any]]:
        return evaluate(_pruned(element, rule_set.element_reads))

    # Remembered per whole element (as plain JSON, it is as quick to key as its pruned copy is to make); a list's
    # elements' keys are made once per list for every layer that judges them (memo.parts).
    elements = value if isinstance(value, list) else [*value]
    keys = memo.parts(value) if isinstance(value, list) else tuple(map(memo.key, elements))
    for index, failing in enumerate(memo.each(rule_set.element_memo, keys, elements, _failing(judged))):
        for rule, outcome in failing:
            yield Violation((*rule.field_path, index if listed else elements[index]), _message(rule, value, outcome),
                            isinstance(outcome, celexpr.Failure))


def _each_violations(rule: Rule, each: tuple[str, celexpr.Expression],
                     value: list[Any] | dict[str, Any]) -> Iterator[Violation]:
    """A `self.all(v, body)` rule whose body reads `self` too (elements compared with one another): the body
    is evaluated per element (per key of a map), in one scope, and each element for which it fails is reported."""
    name, body = each
    listed = isinstance(value, list)
    # Each comprehension step copies its element: only the fields the rule reads are kept.
    elements = [_pruned(e, rule.element_reads) for e in value] if listed else list(value)
    scope = celexpr.Scope({"self": elements if listed else value}, (body,))
    for index, (element, judged) in enumerate(zip(value, elements, strict=True)):
        scope.bind(name, judged)
        outcome = scope.run(body)
        if outcome is not True:
            yield Violation((*rule.field_path, element if not listed else index),
                            _message(rule, value, outcome), isinstance(outcome, celexpr.Failure))


def _pruned(value: Any, reads: frozenset[str] | None) -> Any:
    return {k: value[k] for k in reads if k in value} if reads is not None and isinstance(value, dict) else value


def _message(rule: Rule, value: Any, outcome: Any) -> str:
    if isinstance(outcome, celexpr.Failure):
        return f"{rule.message}: {outcome.message}"
    if rule.message_expression is not None:
        said = celexpr.evaluate(rule.message_expression, {"self": value})
        # The API server falls back to the message for a messageExpression that fails or says nothing.
        if isinstance(said, str) and said.strip() and "\n" not in said:
            return said.strip()
    return rule.message
