"""Warning and denial lines: `clip` keeps a line to the API server's byte limit, one line, never half a character."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from webhook import verdict

# Control characters, line and paragraph separators, a no-break space, two- to four-byte characters.
TEXT = st.text(st.sampled_from(["a", " ", "\n", "\t", "\x00", "\x1f", "\x7f", "\u2028", "\xa0", "é", "…", "日", "😀"]),
               max_size=300)


def reference(text: str, limit: int) -> str:
    """The rule spelled out: control characters become spaces, the ends are stripped, and a line over the
    limit keeps the longest whole-character prefix that leaves room for the ellipsis."""
    line = re.sub(r"[\x00-\x1f\x7f]+", " ", text).strip()
    if len(line.encode()) <= limit:
        return line
    keep = line
    while len(keep.encode()) > limit - len("…".encode()):
        keep = keep[:-1]
    return keep.rstrip() + "…"


@given(TEXT, st.sampled_from([3, 4, 10, 100, verdict.WARNING_LIMIT]))
def test_clip_is_the_rule(text: str, limit: int) -> None:
    clipped = verdict.clip(text, limit)
    assert clipped == reference(text, limit)
    assert len(clipped.encode()) <= limit


def test_clip_cuts_ascii_and_wider_text_alike() -> None:
    assert verdict.clip("a" * 300) == "a" * (verdict.WARNING_LIMIT - 3) + "…"
    assert verdict.clip("a" * verdict.WARNING_LIMIT) == "a" * verdict.WARNING_LIMIT
    assert verdict.clip("é" * 200) == "é" * ((verdict.WARNING_LIMIT - 3) // 2) + "…"
    assert verdict.clip(" one\r\ntwo\x7f ") == "one two"


def test_a_denial_rests_on_the_other_objects_of_its_errors_in_order_of_first_mention() -> None:
    from simulation import findings
    from simulation.analysis import report as rp

    def ref(name: str, kind: str = "NodeOverlay") -> findings.ObjectRef:
        return findings.ObjectRef(kind, name)

    subject = ref("me")
    found = (findings.make("same-weight-conflict", ref("me"), ("spec", "price"), "m", related=[ref("b"), ref("a")]),
             findings.make("shadowed", ref("c"), ("spec", "price"), "m", related=[ref("me"), ref("b")]),
             findings.make("unknown-label", ref("d"), ("spec",), "m"),
             findings.make("same-weight-conflict", ref("me", "NodePool"), ("spec",), "m", related=[ref("a")]))
    report = rp.Report(found, {}, None, {}, {}, None, ())  # type: ignore[arg-type]
    assert [f.severity for f in found] == [findings.Severity.ERROR, findings.Severity.WARNING,
                                           findings.Severity.WARNING, findings.Severity.ERROR]
    # Errors only; the subject itself never; a NodePool of the subject's name is another object.
    assert verdict.grounds(report, subject) == [ref("a"), ref("b"), ref("me", "NodePool")]
