"""Log lines on stdout, JSON for machines or text for people, with the current request's
id on every line it causes, and the current trace and span ids on every line written
inside a traced request or attempt. Repeats of one warning or error (an outage makes
every poll fail alike) are written once per `REPEAT_WINDOW_SECONDS`, with their count."""

from __future__ import annotations

import enum
import json
import logging
import sys
import threading
import time
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

import msgspec
from opentelemetry import trace

from jobqueue.domain.errors import StoreUnavailable

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
# A flag set through `extra=` (`every_time`) on a line that is an event of its own each
# time, however alike the last one was: `RepeatFilter` never holds it back.
_EVERY_TIME = "jobqueue_every_time"
# Extras that libraries add for their own console output, and our own flag: noise in a
# line.
_DROPPED_EXTRAS = frozenset({"color_message", _EVERY_TIME})
# A record's keys that are no field of a JSON line's own (`extra=`): built once, not for
# every key of every line (that union was half of a worker's line, about 20 µs).
_NOT_EXTRAS = _RECORD_ATTRIBUTES | _OWN_FIELDS | _DROPPED_EXTRAS
# What a line holds, as JSON: msgspec's encoder, several times as fast as `json.dumps`
# (each job writes two lines). A value it cannot hold (an exception) is rendered by
# `str` rather than losing the whole line.
_json_line = msgspec.json.Encoder(enc_hook=str).encode


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
            if key not in _NOT_EXTRAS:
                line[key] = value
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["traceback"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return _json_line(line).decode()


class TextFormatter(logging.Formatter):
    """One line a person reads: time, level, logger, message, then every other field as
    `key=value`; a traceback follows on its own lines."""

    def format(self, record: logging.LogRecord) -> str:
        fields = [
            f"{key}={_shown(value)}"
            for key, value in vars(record).items()
            if key not in _NOT_TEXT_FIELDS
        ]
        line = (
            f"{_rfc3339(record.created)} {record.levelname:<7} {record.name}: {record.getMessage()}"
        )
        if fields:
            line += "  " + " ".join(fields)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:
            line += "\n" + record.exc_text
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


# Shown in a text line's head (time, level, logger, message) rather than as fields.
_TEXT_HEADER = frozenset({"ts", "level", "logger", "message", "traceback"})
_NOT_TEXT_FIELDS = _RECORD_ATTRIBUTES | _DROPPED_EXTRAS | _TEXT_HEADER


def _shown(value: object) -> str:
    text = str(value)
    # Quoted when a reader (or a grep) could not tell where the value ends.
    return json.dumps(text, ensure_ascii=False) if not text or " " in text or '"' in text else text


# How long a warning or error that repeats is kept to its first line; the first repeat
# after it is written with the count of those left out.
REPEAT_WINDOW_SECONDS = 10.0
# Distinct repeating lines remembered at most; past it, the oldest windows are forgotten.
_MAX_REMEMBERED = 1000


class RepeatFilter(logging.Filter):
    """Writes a warning or error that repeats (same logger, level, message, exception
    type and text, or `error` field, and job) once per window, then once more with `repeated`,
    the number left out in between. INFO and below always pass: those are events, each
    its own (a job submitted, a request served); so do lines marked `every_time`."""

    def __init__(self, window_seconds: float = REPEAT_WINDOW_SECONDS) -> None:
        super().__init__()
        self._window = window_seconds
        self._lock = threading.Lock()
        # key -> (when its window opened, how many were left out since)
        self._seen: dict[Hashable, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or getattr(record, _EVERY_TIME, False):
            return True
        key = _repeat_key(record)
        now = time.monotonic()
        with self._lock:
            opened, left_out = self._seen.get(key, (None, 0))
            if opened is not None and now - opened < self._window:
                self._seen[key] = (opened, left_out + 1)
                return False
            if len(self._seen) >= _MAX_REMEMBERED:
                self._forget(now)
            self._seen[key] = (now, 0)
        if left_out:
            record.repeated = left_out
        return True

    def _forget(self, now: float) -> None:
        expired = [key for key, (opened, _) in self._seen.items() if now - opened >= self._window]
        for key in expired or list(self._seen)[: _MAX_REMEMBERED // 2]:
            del self._seen[key]


def _repeat_key(record: logging.LogRecord) -> Hashable:
    error = record.exc_info[1] if record.exc_info else None
    return (
        record.name,
        record.levelno,
        str(record.msg),
        type(error).__name__ if error is not None else None,
        str(error) if error is not None else str(getattr(record, "error", "")),
        # A job's own warning (it timed out, it was abandoned) is that job's event: two
        # jobs alike are two lines. An outage's are no job's.
        getattr(record, "job_id", None),
    )


def every_time(fields: Mapping[str, object]) -> dict[str, object]:
    """`fields` as the `extra=` of a line `RepeatFilter` never holds back: one that an
    operator alerts on, each of which asks for a person (a job that failed)."""
    return {**fields, _EVERY_TIME: True}


def log_failure(
    log: logging.Logger | logging.LoggerAdapter[logging.Logger],
    message: str,
    error: BaseException | None,
    *args: object,
    extra: dict[str, object] | None = None,
) -> None:
    """Log a step that failed with `error`: an outage (the store unavailable, a timeout,
    a network error) as a WARNING that names it, since its traceback says nothing new
    each poll; anything else as an ERROR with its traceback."""
    fields = dict(extra or {})
    if isinstance(error, StoreUnavailable | TimeoutError | OSError):
        fields["error"] = f"{type(error).__name__}: {error}"
        # stacklevel: the line is the caller's, as if it had logged it itself.
        log.warning(message, *args, extra=fields, stacklevel=2)
    else:
        log.error(message, *args, exc_info=error, extra=fields, stacklevel=2)


class Outage:
    """A failure that persists until it ends, as a store that is away fails every poll
    alike: said once as it begins (WARNING, with the error), and, when `ended` is given,
    once at INFO as it is over; never once per try."""

    def __init__(
        self,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger],
        began: str,
        ended: str | None = None,
    ) -> None:
        self._log = log
        self._began = began
        self._ended = ended
        self._failing = False

    def failed(self, error: str) -> None:
        if not self._failing:
            # stacklevel: the line is the caller's, as if it had logged it itself.
            self._log.warning(self._began, extra={"error": error}, stacklevel=2)
        self._failing = True

    def ok(self) -> None:
        if self._failing and self._ended is not None:
            self._log.info(self._ended, stacklevel=2)
        self._failing = False


class LogFormat(enum.StrEnum):
    JSON = "json"
    TEXT = "text"


def default_log_format(stream: TextIO) -> LogFormat:
    """Text for a person at a terminal, JSON for anything collecting the output."""
    try:
        return LogFormat.TEXT if stream.isatty() else LogFormat.JSON
    except ValueError:  # a closed stream
        return LogFormat.JSON


# The last second a line was written in, and its text up to the seconds: lines come many
# to a second, and `strftime` cost each one about 4 µs.
_second: tuple[int, str] = (-1, "")


def _rfc3339(created: float) -> str:
    global _second
    whole = int(created)
    # Rounded, as datetime rounds: a float holds a microsecond only to within a fraction.
    micro = round((created - whole) * 1_000_000)
    if micro == 1_000_000:
        whole, micro = whole + 1, 0
    second, text = _second
    if whole != second:
        text = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        # One tuple, swapped whole: a thread reads either the old second or the new one.
        _second = (whole, text)
    return f"{text}.{micro:06d}Z"


def configure_logging(
    level: str = "INFO", stream: TextIO | None = None, log_format: LogFormat | None = None
) -> None:
    """Route every logger through one handler on `stream` (stdout by default), writing
    `log_format` (by default: text on a terminal, else JSON)."""
    out = stream if stream is not None else sys.stdout
    # What no line shows is not gathered for every record (the logging documentation's
    # "Optimization"): the thread's and process's names. Where the call was made from is
    # gathered still, though it is about a tenth of a line's cost (profiled): `stacklevel`
    # makes a helper's line its caller's, for whoever reads the records themselves.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(out)
    chosen = default_log_format(out) if log_format is None else log_format
    handler.setFormatter(JsonFormatter() if chosen is LogFormat.JSON else TextFormatter())
    handler.addFilter(RepeatFilter())
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
