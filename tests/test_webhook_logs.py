"""The webhook's JSON log lines: one object per record, with the record's fields and extras."""

from __future__ import annotations

import datetime
import io
import json
import logging
import re
import sys
from collections.abc import Iterator

import pytest

from webhook import logs


def record(created: float, **extra: object) -> logging.LogRecord:
    out = logging.getLogger("overlay-guard.test").makeRecord(
        "overlay-guard.test", logging.INFO, __file__, 1, "admission %s", ("x",), None, extra=extra)
    out.created = created
    return out


@pytest.mark.parametrize("created", [
    0.0, 1_700_000_000.0, 1_700_000_000.9999996, 1_851_748_400.4349995, 1_851_748_400.4345, 1_763_000_123.0015])
def test_time_is_utc_to_the_millisecond_as_datetime_prints_it(created: float) -> None:
    expected = datetime.datetime.fromtimestamp(created, datetime.UTC).isoformat(timespec="milliseconds")
    formatter = logs.JsonFormatter()
    for _ in range(2):  # the second line reuses the remembered second
        line = json.loads(formatter.format(record(created)))
        assert line["time"] == expected.replace("+00:00", "Z")


def test_a_line_carries_level_logger_message_fields_and_extras() -> None:
    formatter = logs.JsonFormatter()
    line = json.loads(formatter.format(record(1_700_000_000.0, fields={"uid": "u-1", "durationMs": 1.5})))
    assert line == {"time": "2023-11-14T22:13:20.000Z", "level": "info", "logger": "overlay-guard.test",
                    "msg": "admission x", "uid": "u-1", "durationMs": 1.5}
    line = json.loads(formatter.format(record(1_700_000_000.0, port=9443, _private=1, fields={"a": "é"})))
    assert line["port"] == 9443 and line["a"] == "é" and "_private" not in line
    # A field wins over an extra of the same name; values JSON cannot hold are written as text.
    line = json.loads(formatter.format(record(1_700_000_000.0, port=1, fields={"port": 2, "path": object})))
    assert line["port"] == 2 and line["path"] == str(object)


def test_an_exception_is_one_field_of_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.getLogger("x").makeRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = logs.JsonFormatter().format(failed)
    assert "\n" not in text
    line = json.loads(text)
    assert line["level"] == "error" and "ValueError: boom" in line["exception"]



class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root")
def test_a_line_per_request_is_the_line_a_record_gives() -> None:
    out = io.StringIO()
    logs.setup("info", out)
    root = logging.getLogger()
    # pytest's own capture handlers would take the Logger's path: only setup's handler stays.
    assert [type(h) for h in root.handlers] == [logs.JsonHandler]
    logger = logging.getLogger("overlay-guard.test-line")
    fields = {"uid": "u-1", "dryRun": True, "durationMs": 1.5, "name": "é"}
    logs.info(logger, "admission", fields)
    logger.info("admission", extra={"fields": fields})
    direct, recorded = (json.loads(line) for line in out.getvalue().splitlines())
    for line in (direct, recorded):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line.pop("time"))
    assert direct == recorded == {"level": "info", "logger": "overlay-guard.test-line", "msg": "admission", **fields}


@pytest.mark.usefixtures("restore_root")
def test_a_line_per_request_respects_levels_and_reaches_every_handler() -> None:
    out = io.StringIO()
    logs.setup("warning", out)
    logger = logging.getLogger("overlay-guard.test-levels")
    logs.info(logger, "admission", {"uid": "u-1"})
    assert out.getvalue() == ""
    logs.setup("info", out)
    extra = Capture()
    logging.getLogger().addHandler(extra)
    logs.info(logger, "admission", {"uid": "u-2"})
    assert [r.__dict__["fields"] for r in extra.records] == [{"uid": "u-2"}]
    assert json.loads(out.getvalue())["uid"] == "u-2"
    logging.getLogger().removeHandler(extra)
    logger.addFilter(lambda r: False)
    try:
        logs.info(logger, "admission", {"uid": "u-3"})
    finally:
        logger.filters.clear()
    assert len(out.getvalue().splitlines()) == 1
