"""Capturing what a logger writes through the service's own JSON formatter."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from jobqueue.adapters.telemetry.logging import JsonFormatter, RequestIdFilter


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line]


class JsonLog:
    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    def lines(self) -> list[dict[str, Any]]:
        return json_lines(self.stream)

    def find(self, **fields: Any) -> list[dict[str, Any]]:
        return [
            line
            for line in self.lines()
            if all(line.get(key) == value for key, value in fields.items())
        ]


@contextmanager
def captured_json_log(
    logger_name: str = "jobqueue",
    *,
    filters: Sequence[logging.Filter] | None = None,
    level: int = logging.INFO,
    propagate: bool = True,
) -> Iterator[JsonLog]:
    """The lines `logger_name` writes, through the service's formatter and `filters`
    (default: the request-id filter), restoring the logger afterwards."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    for each in (RequestIdFilter(),) if filters is None else filters:
        handler.addFilter(each)
    logger = logging.getLogger(logger_name)
    previous = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate
    try:
        yield JsonLog(stream)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous[0])
        logger.propagate = previous[1]
