"""Log lines for people (LOG_FORMAT=text), repeats kept to one line with a count, and
failures logged with a traceback only when one helps."""

from __future__ import annotations

import io
import json
import logging
import time
import uuid

import pytest

from jobqueue.adapters.telemetry.logging import (
    JsonFormatter,
    LogFormat,
    RepeatFilter,
    TextFormatter,
    configure_logging,
    default_log_format,
    every_time,
    log_failure,
)
from jobqueue.domain.errors import StoreUnavailable


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    # The logging module calls `time.monotonic` through `time`: patched there, it sees it.
    monkeypatch.setattr(time, "monotonic", fake)
    return fake


def _logger(
    formatter: logging.Formatter, *filters: logging.Filter
) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    for each in filters:
        handler.addFilter(each)
    logger = logging.getLogger(f"test.lines.{uuid.uuid4().hex}")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, stream


@pytest.fixture
def text() -> tuple[logging.Logger, io.StringIO]:
    return _logger(TextFormatter())


def test_a_text_line_has_time_level_logger_message_then_fields(
    text: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = text
    logger.warning(
        "job failed permanently: %s", "Permanent: no", extra={"job_id": "j-1", "why": "two words"}
    )
    line = stream.getvalue().rstrip("\n")
    stamp, level, name, rest = line.split(" ", 3)
    assert stamp.endswith("Z")
    assert "T" in stamp
    assert level == "WARNING"
    assert name == f"{logger.name}:"
    assert rest == 'job failed permanently: Permanent: no  job_id=j-1 why="two words"'


def test_a_text_line_puts_the_traceback_below_it(text: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = text
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logger.exception("it broke")
    first, *rest = stream.getvalue().rstrip("\n").split("\n")
    assert first.endswith("it broke")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "RuntimeError: boom"


def test_configure_logging_writes_text_when_asked() -> None:
    stream = io.StringIO()
    configure_logging("INFO", stream, LogFormat.TEXT)
    logging.getLogger("some.library").warning("library speaks")
    assert " WARNING some.library: library speaks" in stream.getvalue()
    configure_logging("INFO", stream, LogFormat.JSON)  # as the other tests expect it


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_text_is_the_default_on_a_terminal_json_elsewhere() -> None:
    assert default_log_format(_Terminal()) is LogFormat.TEXT
    assert default_log_format(io.StringIO()) is LogFormat.JSON


def test_a_repeating_error_is_written_once_per_window_then_with_its_count(clock: _Clock) -> None:
    logger, stream = _logger(JsonFormatter(), RepeatFilter(window_seconds=10))
    for _ in range(5):
        logger.warning("claiming jobs failed", extra={"error": "ConnectionRefusedError: down"})
        clock.now += 1
    # Another message, and another error text, are lines of their own.
    logger.warning("claiming jobs failed", extra={"error": "TimeoutError: slow"})
    logger.warning("renewing leases failed", extra={"error": "ConnectionRefusedError: down"})
    clock.now += 10
    logger.warning("claiming jobs failed", extra={"error": "ConnectionRefusedError: down"})

    written = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["message"], line["error"], line.get("repeated")) for line in written] == [
        ("claiming jobs failed", "ConnectionRefusedError: down", None),
        ("claiming jobs failed", "TimeoutError: slow", None),
        ("renewing leases failed", "ConnectionRefusedError: down", None),
        ("claiming jobs failed", "ConnectionRefusedError: down", 4),
    ]


def test_repeats_of_an_exception_count_by_its_type_and_text(clock: _Clock) -> None:
    logger, stream = _logger(JsonFormatter(), RepeatFilter(window_seconds=10))
    for text in ("a", "a", "b"):
        try:
            raise ValueError(text)
        except ValueError:
            logger.exception("pass failed")
    written = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["traceback"].splitlines()[-1] for line in written] == [
        "ValueError: a",
        "ValueError: b",
    ]


def test_the_same_warning_of_two_jobs_is_two_lines(clock: _Clock) -> None:
    logger, stream = _logger(JsonFormatter(), RepeatFilter(window_seconds=10))
    for job_id in ("j-1", "j-2", "j-2"):
        logger.warning("job finished without an outcome", extra={"job_id": job_id})
    written = [json.loads(line)["job_id"] for line in stream.getvalue().splitlines()]
    assert written == ["j-1", "j-2"]


def test_a_line_marked_every_time_is_never_held_back_nor_shows_its_mark(clock: _Clock) -> None:
    logger, stream = _logger(JsonFormatter(), RepeatFilter(window_seconds=10))
    for _ in range(3):
        logger.warning("job failed: %s", "Permanent: no", extra=every_time({"job_id": "j-1"}))
    logger.warning("job failed: %s", "Permanent: no", extra={"job_id": "j-1"})
    logger.warning("job failed: %s", "Permanent: no", extra={"job_id": "j-1"})
    written = [json.loads(line) for line in stream.getvalue().splitlines()]
    # Three marked lines, then the first unmarked one; its repeat is held back.
    assert [sorted(line) for line in written] == [
        ["job_id", "level", "logger", "message", "ts"]
    ] * 4
    text_logger, text_stream = _logger(TextFormatter())
    text_logger.warning("job failed", extra=every_time({"job_id": "j-1"}))
    assert text_stream.getvalue().rstrip("\n").endswith("job failed  job_id=j-1")


def test_info_lines_are_never_held_back(clock: _Clock) -> None:
    logger, stream = _logger(JsonFormatter(), RepeatFilter(window_seconds=10))
    for _ in range(3):
        logger.info("job submitted")
    assert len(stream.getvalue().splitlines()) == 3


def test_an_outage_is_a_warning_naming_it_anything_else_an_error_with_its_traceback() -> None:
    logger, stream = _logger(JsonFormatter())
    log_failure(logger, "claiming failed; again in %gs", StoreUnavailable("gone"), 0.5)
    log_failure(logger, "claiming failed; again in %gs", ConnectionRefusedError(111, "refused"), 1)
    log_failure(logger, "claiming failed; again in %gs", KeyError("bug"), 2, extra={"n": 1})
    outage, refused, bug = (json.loads(line) for line in stream.getvalue().splitlines())
    assert (outage["level"], outage["message"], outage["error"]) == (
        "WARNING",
        "claiming failed; again in 0.5s",
        "StoreUnavailable: gone",
    )
    assert "traceback" not in outage
    assert refused["level"] == "WARNING"
    assert "traceback" not in refused
    assert (bug["level"], bug["n"]) == ("ERROR", 1)
    assert bug["traceback"].splitlines()[-1] == "KeyError: 'bug'"


def test_a_json_line_stamps_its_own_moment_across_seconds_and_renders_any_value() -> None:
    logger, stream = _logger(JsonFormatter())
    # 2026-12-06 10:59:59.999999 then 11:00:00.000001 UTC: the second's text is kept
    # between lines, and must change with it.
    moments = (1796554799.999999, 1796554800.000001, 1796554799.5)
    for moment in moments:
        record = logger.makeRecord(
            logger.name, logging.INFO, __file__, 0, "tick", (), None, extra={"n": moment}
        )
        record.created = moment
        logger.handle(record)
    failure = ValueError("not JSON")
    logger.info("job failed", extra={"error": failure, "job_id": uuid.UUID(int=1), "ok": "é"})
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["ts"] for line in lines[:3]] == [
        "2026-12-06T10:59:59.999999Z",
        "2026-12-06T11:00:00.000001Z",
        "2026-12-06T10:59:59.500000Z",
    ]
    assert (lines[3]["error"], lines[3]["job_id"], lines[3]["ok"]) == (
        "not JSON",
        "00000000-0000-0000-0000-000000000001",
        "é",
    )
    assert '"é"' in stream.getvalue()  # as written, not escaped
