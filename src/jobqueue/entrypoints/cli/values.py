"""What the operator's commands take as values on the command line: JSON, an instant with
its offset, a duration, seconds, a count, names and statuses. Each raises
`ArgumentTypeError`, which argparse reports as a usage error (exit 2) naming the option.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta
from typing import Any

from jobqueue.domain.durations import parse_duration
from jobqueue.domain.status import Status


def json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None


def instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time such as 2026-12-01T09:00:00Z"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no offset: add Z (UTC) or one such as +01:00"
        )
    return moment


def duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return seconds


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return int(text)


def names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("names no field")
    return names


def statuses(text: str) -> frozenset[Status]:
    try:
        return frozenset(Status(name) for name in names(text))
    except ValueError:
        shown = ", ".join(status.value for status in Status)
        raise argparse.ArgumentTypeError(f"{text!r}: each must be one of {shown}") from None
