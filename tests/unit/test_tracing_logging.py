"""Log lines written inside a span carry its trace and span ids; others carry none."""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from jobqueue.adapters.telemetry.logging import (
    TraceContextFilter,
    configure_logging,
)
from tests.support.logs import captured_json_log
from tests.support.logs import json_lines as lines

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7
SPAN = NonRecordingSpan(SpanContext(TRACE_ID, SPAN_ID, False, TraceFlags(TraceFlags.SAMPLED)))


@pytest.fixture
def log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    name = f"test.tracing.{uuid.uuid4().hex}"
    with captured_json_log(name, filters=(TraceContextFilter(),), propagate=False) as captured:
        yield logging.getLogger(name), captured.stream


def test_line_inside_a_span_carries_its_ids_in_hex(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log
    with trace.use_span(SPAN):
        logger.info("inside")
    [line] = lines(stream)
    assert line["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert line["span_id"] == "00f067aa0ba902b7"


def test_line_outside_any_span_has_no_trace_fields(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log
    logger.info("outside")
    [line] = lines(stream)
    assert "trace_id" not in line
    assert "span_id" not in line


def test_invalid_span_adds_no_trace_fields(log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = log
    with trace.use_span(trace.INVALID_SPAN):
        logger.info("no trace here")
    [line] = lines(stream)
    assert "trace_id" not in line


def test_trace_fields_come_right_after_the_message(
    log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log
    with trace.use_span(SPAN):
        logger.info("ordered", extra={"job_id": "j1"})
    [line] = lines(stream)
    assert list(line) == ["ts", "level", "logger", "message", "trace_id", "span_id", "job_id"]


def test_configured_logging_stamps_trace_ids() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        configure_logging("INFO", stream)
        with trace.use_span(SPAN):
            logging.getLogger("jobqueue.test").info("configured")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    [line] = lines(stream)
    assert line["trace_id"] == f"{TRACE_ID:032x}"
