"""Kubernetes' apimachinery syntax checks (DNS names, qualified names, label values, Go integers) and the
conversion of a reader's values to the JSON the API server receives, shared by the API-server and the
runtime validation layers. Readers type YAML scalars as kubectl does and hand plain values: no YAML
library is known here."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*", re.ASCII)
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", re.ASCII)
_GO_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def dns_subdomain_errors(value: str) -> list[str]:
    errs = ["must be no more than 253 characters"] if len(value) > 253 else []
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append("must be a lowercase RFC 1123 subdomain (e.g. 'example.com')")
    return errs


def qualified_name_errors(value: str) -> list[str]:
    parts = value.split("/")
    if len(parts) > 2:
        return ["must be a name with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    errs: list[str] = []
    if len(parts) == 2:
        errs += ["prefix part must be non-empty"] if not parts[0] else [
            f"prefix part {e}" for e in dns_subdomain_errors(parts[0])]
    name = parts[-1]
    if len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME_PART.fullmatch(name):
        errs.append("name part must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric")
    return errs


def label_value_errors(value: str) -> list[str]:
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _LABEL_VALUE.fullmatch(value):
        errs.append("must be empty or alphanumerics, '-', '_' or '.', starting and ending alphanumeric")
    return errs


def parse_go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), which both CEL's int() and Go's strconv.Atoi use."""
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


# Already plain: all that a reader gives.
_PLAIN = frozenset({str, int, float, bool, type(None)})


def plain_json(value: Any) -> Any:
    """The JSON value the API server would receive for a value: a caller's tuple or Mapping, a subclass of a
    scalar type or a date (as the kubernetes client gives) become what JSON makes of them."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, list | tuple):  # before Mapping, an abstract class and slower to test against
        return [plain_json(v) for v in value]
    if isinstance(value, dict | Mapping):
        return {plain_key(k): plain_json(v) for k, v in value.items()}
    for plain in (bool, int, float, str):
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    return None if value is None else str(value)


def plain_key(key: Any) -> str:
    """A mapping key as the JSON object's member name."""
    if type(key) is str:
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    return key if isinstance(key, str) else str(plain_json(key))
