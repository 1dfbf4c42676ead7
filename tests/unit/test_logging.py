"""JSON log lines: fields, extras, tracebacks, and the request id from the context."""

from __future__ import annotations

import asyncio
import io
import logging
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from jobqueue.adapters.telemetry.logging import (
    configure_logging,
    request_context,
)
from tests.support.logs import captured_json_log
from tests.support.logs import json_lines as lines

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    name = f"test.logging.{uuid.uuid4().hex}"
    with captured_json_log(name, level=logging.DEBUG, propagate=False) as captured:
        yield logging.getLogger(name), captured.stream


def test_a_line_has_time_level_logger_and_message(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log

    logger.warning("disk %s is %d%% full", "/var", 93)

    [line] = lines(stream)
    assert set(line) == {"ts", "level", "logger", "message"}
    assert line["level"] == "WARNING"
    assert line["logger"] == logger.name
    assert line["message"] == "disk /var is 93% full"
    assert RFC3339_UTC.match(line["ts"])
    logged_at = datetime.strptime(line["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - logged_at).total_seconds()) < 60


def test_extra_fields_become_top_level_fields(log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = log
    job_id = uuid.uuid4()

    logger.info(
        "job submitted",
        extra={"job_id": job_id, "job_type": "sleep", "replayed": False, "n": 3, "x": None},
    )

    [line] = lines(stream)
    assert line["job_id"] == str(job_id)  # not JSON-native: rendered with str()
    assert line["job_type"] == "sleep"
    assert line["replayed"] is False
    assert line["n"] == 3
    assert line["x"] is None


def test_exception_info_becomes_a_traceback_field(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log

    try:
        raise ValueError("bad thing")
    except ValueError:
        logger.exception("it failed")

    [line] = lines(stream)
    assert line["level"] == "ERROR"
    assert line["message"] == "it failed"
    assert line["traceback"].startswith("Traceback (most recent call last):")
    assert line["traceback"].rstrip().endswith("ValueError: bad thing")
    assert "\n" not in stream.getvalue().rstrip("\n")  # still one physical line


def test_the_request_id_of_the_current_context_is_added(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log

    logger.info("outside")
    with request_context("req-1"):
        logger.info("inside")
    logger.info("after")

    assert [line.get("request_id") for line in lines(stream)] == [None, "req-1", None]


async def test_concurrent_requests_keep_their_own_request_ids(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log
    both_inside = asyncio.Barrier(2)

    async def handle(request_id: str) -> None:
        with request_context(request_id):
            await both_inside.wait()
            logger.info("handling", extra={"who": request_id})

    await asyncio.gather(handle("a"), handle("b"))

    assert sorted((line["who"], line["request_id"]) for line in lines(stream)) == [
        ("a", "a"),
        ("b", "b"),
    ]


def test_an_explicit_request_id_extra_wins_over_the_context(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log

    with request_context("from-context"):
        logger.info("explicit", extra={"request_id": "given"})

    assert lines(stream)[0]["request_id"] == "given"


def test_non_ascii_text_is_kept_readable(log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = log

    logger.info("café ✓")

    assert "café ✓" in stream.getvalue()


@pytest.fixture
def pristine_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    access = logging.getLogger("uvicorn.access")
    access_disabled = access.disabled
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    access.disabled = access_disabled


@pytest.mark.usefixtures("pristine_root")
def test_configure_logging_sends_every_logger_through_one_json_handler() -> None:
    stream = io.StringIO()

    configure_logging("WARNING", stream)
    logging.getLogger("some.library").warning("library speaks")
    logging.getLogger("some.library").info("too quiet to show")
    logging.getLogger("uvicorn.access").warning("uvicorn's own access line")
    logging.getLogger("uvicorn.error").error("uvicorn error")

    messages = [line["message"] for line in lines(stream)]
    assert messages == ["library speaks", "uvicorn error"]
    assert len(logging.getLogger().handlers) == 1
