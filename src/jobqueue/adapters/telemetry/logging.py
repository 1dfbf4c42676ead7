"""JSON log lines on stdout, with the current request's id on every line it causes, and
the current trace and span ids on every line written inside a traced request or attempt."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

from opentelemetry import trace

# Set by the HTTP middleware for the duration of one request; a context variable, so
# concurrent requests on one event loop each see their own.
request_id_var: ContextVar[str | None] = ContextVar("jobqueue_request_id", default=None)

# Every attribute the stdlib puts on a LogRecord; anything else came from `extra=`.
_RECORD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
) | {"message", "asctime", "taskName"}
_OWN_FIELDS = frozenset(
    {"ts", "level", "logger", "message", "request_id", "trace_id", "span_id", "traceback"}
)
# Extras that libraries add for their own console output: noise in a JSON line.
_DROPPED_EXTRAS = frozenset({"color_message"})


@contextmanager
def request_context(request_id: str) -> Iterator[None]:
    token = request_id_var.set(request_id)
    try:
        yield
    finally:
        request_id_var.reset(token)


class RequestIdFilter(logging.Filter):
    """Stamps records with the request id of the context they were logged in.

    A filter rather than a formatter concern: filters run synchronously in the logging
    call, inside the request's context, whereas formatting may happen elsewhere.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            request_id = request_id_var.get()
            if request_id is not None:
                record.request_id = request_id
        return True


class TraceContextFilter(logging.Filter):
    """Stamps records with the ids of the span current where they were logged, in the
    hex form trace backends show, so a log line leads to its trace and back.

    Without tracing no span is ever current and records are left as they are.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "trace_id", None) is None:
            context = trace.get_current_span().get_span_context()
            if context.is_valid:
                record.trace_id = format(context.trace_id, "032x")
                record.span_id = format(context.span_id, "016x")
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, request_id, trace_id and
    span_id, every `extra=` field, and `traceback` when there is exception info."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _rfc3339(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for own in ("request_id", "trace_id", "span_id"):
            value = getattr(record, own, None)
            if value is not None:
                line[own] = value
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES | _OWN_FIELDS | _DROPPED_EXTRAS:
                line[key] = value
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["traceback"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # `default=str` so that an extra value JSON cannot hold (a UUID, a datetime, an
        # exception) is rendered rather than losing the whole line.
        return json.dumps(line, default=str, ensure_ascii=False)


def _rfc3339(created: float) -> str:
    moment = datetime.fromtimestamp(created, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def configure_logging(level: str = "INFO", stream: TextIO | None = None) -> None:
    """Route every logger through one JSON handler on `stream` (stdout by default)."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stdout)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    handler.addFilter(TraceContextFilter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # Uvicorn's loggers come with handlers of their own; let them propagate to ours
    # instead, and silence its access log, since the middleware writes a richer one.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
    logging.getLogger("uvicorn.error").setLevel(max(logging.INFO, root.level))
    # Alembic announces every plugin it loads at INFO on each migration run.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
