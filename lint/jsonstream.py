"""A JSON report written as json.dumps(document, indent=2) writes it, with its one long list streamed.

A report of tens of thousands of findings (a crowd of alike overlays) held as dicts and then as one string
took twice the memory of the run that found them; here each item is built, written with the others of its
chunk and dropped, so the output costs a chunk's worth, whatever the report's size.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from typing import Any, TextIO

# Stands in the document for the streamed list: a string no finding or note can produce.
SLOT = "\x00overlay-guard: streamed items\x00"
# Items per write: few writes, and a bounded text in memory.
CHUNK = 256
INDENT = 2


def write(out: TextIO, document: Any, items: Iterable[Any]) -> None:
    """Writes json.dumps(document, indent=INDENT) and a newline, with `items` (a list) in place of the one
    SLOT value in `document`."""
    head, slot, tail = json.dumps(document, indent=INDENT).partition(json.dumps(SLOT))
    if not slot:
        raise ValueError("the document has no slot for its items")
    line = head[head.rfind("\n") + 1:]
    # json.dumps puts a list's items one level deeper than the line holding its key.
    pad = "\n" + line[:len(line) - len(line.lstrip(" "))] + " " * INDENT
    out.write(head)
    source = iter(items)
    first = True
    while chunk := list(itertools.islice(source, CHUNK)):
        texts = [_text(item, pad) for item in chunk]
        out.write(("[" if first else ",") + pad + ("," + pad).join(texts))
        first = False
    out.write("[]" if first else pad[:-INDENT] + "]")
    out.write(tail + "\n")


_ESCAPE = json.encoder.encode_basestring_ascii


def _text(value: Any, pad: str) -> str:
    """json.dumps(value, indent=INDENT) at the depth `pad` ("\\n" and the spaces before a member there) opens.
    By hand for the shapes a report holds (str-keyed dicts, lists, strings, ints, booleans, null) because the
    standard library indents in pure-Python generators (its C encoder takes no indent), at twice this cost per
    finding; anything else is json.dumps's own text, re-indented."""
    kind = type(value)
    if kind is str:
        return _ESCAPE(value)
    if kind is dict:
        text = _object(value, pad)
        if text is not None:
            return text
    elif kind is list:
        if not value:
            return "[]"
        inner = pad + " " * INDENT
        return "[" + ",".join([inner + _text(member, inner) for member in value]) + pad + "]"
    elif kind is int:
        return int.__repr__(value)
    elif kind is bool or value is None:
        return _CONSTANTS[value]
    # A JSON text has newlines only between tokens (a string's are escaped): re-indenting is a replace.
    return json.dumps(value, indent=INDENT).replace("\n", pad)


_CONSTANTS = {None: "null", True: "true", False: "false"}


def _object(value: dict[Any, Any], pad: str) -> str | None:
    if not value:
        return "{}"
    inner = pad + " " * INDENT
    members = []
    for key, member in value.items():
        if type(key) is not str:
            return None  # json.dumps's key coercion is its own
        members.append(f"{inner}{_ESCAPE(key)}: {_text(member, inner)}")
    return "{" + ",".join(members) + pad + "}"
