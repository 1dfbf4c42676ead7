"""What each field of a job may hold: its bounds and its check, declared once.

`NewJob.build` checks a submission with these, the HTTP wire types state the same bounds
to clients (`jobqueue.wire`), and the schema's CHECK constraints hold the store to them.
A check raises `InvalidJob` with a message a client can act on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import TypeAlias

from jobqueue.domain.errors import InvalidJob, UnknownJobType

JsonValue: TypeAlias = dict[str, "JsonValue"] | list["JsonValue"] | str | int | float | bool | None

MIN_ATTEMPTS = 1
MAX_ATTEMPTS = 100
# The attempt budget of a job whose submission and type give none (the service's
# MAX_ATTEMPTS setting overrides it).
DEFAULT_MAX_ATTEMPTS = 5
MAX_TYPE_LENGTH = 200
MAX_IDEMPOTENCY_KEY_LENGTH = 255
# Queues: every job is in one; a worker process consumes the queues it is given, each with
# its own concurrency. A name is what a setting, a URL path and a metric label can carry.
DEFAULT_QUEUE = "default"
MAX_QUEUE_LENGTH = 64
QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
# Priorities within a queue: due jobs are claimed most urgent (lowest) first, then by
# due time. Strict: a steady flood of urgent jobs starves the less urgent ones.
MIN_PRIORITY = 0
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 0
PRIORITIES = range(MIN_PRIORITY, MAX_PRIORITY + 1)
# The furthest ahead a job may be scheduled by `delay`: far beyond any real schedule, and
# a bound that makes a typo (a delay in milliseconds read as seconds) a clear refusal.
MAX_DELAY = timedelta(days=3650)
# The longest one attempt may be given, when a submission or a type says how long.
MAX_TIMEOUT = timedelta(days=7)


def check_type(job_type: object, registered: Collection[str] | None = None) -> None:
    """`registered`: the known types; None skips that check."""
    if not isinstance(job_type, str) or not job_type.strip():
        raise InvalidJob("type must be a non-empty string")
    if len(job_type) > MAX_TYPE_LENGTH:
        raise InvalidJob(f"type must be at most {MAX_TYPE_LENGTH} characters")
    if registered is not None and job_type not in registered:
        raise UnknownJobType(job_type, list(registered))


def check_max_attempts(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob("max_attempts must be an integer")
    if not MIN_ATTEMPTS <= value <= MAX_ATTEMPTS:
        raise InvalidJob(
            f"max_attempts must be between {MIN_ATTEMPTS} and {MAX_ATTEMPTS}, got {value}"
        )


def check_queue_name(name: object) -> str:
    """`name` if it is a valid queue name; raise `ValueError` saying why not."""
    if not isinstance(name, str) or QUEUE_NAME.fullmatch(name) is None:
        raise ValueError(
            f"queue name must be 1 to {MAX_QUEUE_LENGTH} letters, digits or '_.:-', "
            f"starting with a letter or digit; got {name!r}"
        )
    return name


def check_queue(queue: object) -> None:
    try:
        check_queue_name(queue)
    except ValueError as error:
        raise InvalidJob(str(error)) from None


def check_priority(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob("priority must be an integer")
    if value not in PRIORITIES:
        raise InvalidJob(
            f"priority must be between {MIN_PRIORITY} (most urgent) and {MAX_PRIORITY}, got {value}"
        )


def check_timeout(value: object) -> None:
    if not isinstance(value, timedelta):
        raise InvalidJob(f"timeout must be a timedelta, got a {type(value).__name__}")
    if not timedelta(0) < value <= MAX_TIMEOUT:
        raise InvalidJob(
            f"timeout must be positive and at most {MAX_TIMEOUT.days} days, got {value}"
        )


def check_schedule(run_at: object, delay: object) -> None:
    if run_at is not None and delay is not None:
        raise InvalidJob("give run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise InvalidJob(f"run_at must be a datetime, got a {type(run_at).__name__}")
        if run_at.utcoffset() is None:
            # A time without an offset means a different instant on every machine.
            raise InvalidJob("run_at must carry a time zone offset, e.g. 2026-12-01T09:00:00Z")
    if delay is not None:
        if not isinstance(delay, timedelta):
            raise InvalidJob(f"delay must be a timedelta, got a {type(delay).__name__}")
        if not timedelta(0) <= delay <= MAX_DELAY:
            raise InvalidJob(f"delay must be between 0 and {MAX_DELAY.days} days, got {delay}")


def check_idempotency_key(key: object) -> None:
    if key is None:
        return
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise InvalidJob(
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} non-blank characters"
        )


# A location inside a payload as (label, parent): rendered only when reporting an error,
# so walking a deeply nested payload does not build a path string per level.
_Where: TypeAlias = tuple[str, "_Where | None"]


def _render(where: _Where) -> str:
    labels: list[str] = []
    node: _Where | None = where
    while node is not None:
        labels.append(node[0])
        node = node[1]
    return "".join(reversed(labels))


_SCALARS = (str, bool, int, type(None))


def check_json(path: str, value: object) -> None:
    """Refuse a value JSON cannot hold (`path` names it in the message)."""
    # Most payloads are one flat object of strings, numbers and booleans: checked in one
    # pass, without the walk's bookkeeping (which cost ~7 µs per job, a third of a bulk
    # enqueue's client time). Anything else takes the full walk.
    if type(value) is dict and all(
        type(key) is str
        and (isinstance(child, _SCALARS) or (type(child) is float and math.isfinite(child)))
        for key, child in value.items()
    ):
        return
    _walk_json(path, value)


def _walk_json(path: str, value: object) -> None:
    # An explicit stack, not recursion: a deeply nested payload must be accepted or
    # refused, never end in RecursionError. `on_path` holds the containers being walked,
    # so a cycle (which JSON cannot represent) is refused while a list shared by two
    # branches (which serialises fine) is not.
    stack: list[tuple[_Where, object, bool]] = [((path, None), value, False)]
    on_path: set[int] = set()
    while stack:
        where, item, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            continue
        if item is None or isinstance(item, str | bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidJob(f"{_render(where)} holds {item}, which JSON cannot represent")
            continue
        if not isinstance(item, list | dict):
            raise InvalidJob(
                f"{_render(where)} holds a {type(item).__name__}, which is not a JSON value"
            )
        if id(item) in on_path:
            raise InvalidJob(f"{_render(where)} contains itself, which JSON cannot represent")
        on_path.add(id(item))
        stack.append((where, item, True))
        children: list[tuple[_Where, object, bool]] = []
        if isinstance(item, list):
            children = [((f"[{i}]", where), child, False) for i, child in enumerate(item)]
        else:
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidJob(f"{_render(where)} has a non-string key {key!r}")
                children.append(((f".{key}", where), child, False))
        # Reversed so that siblings are checked, and reported, in document order.
        stack.extend(reversed(children))


def storable_text(text: str, max_length: int) -> str:
    """`text` as any store can hold it, of a readable length: a NUL character or a lone
    surrogate would make PostgreSQL refuse the write (and lose the attempt's outcome with
    it), so they are written as visible escapes; past `max_length` it is cut, with "…"."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    if len(text) <= max_length:
        return text
    return text[: max_length - 1] + "…"
