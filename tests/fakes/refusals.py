"""What PostgreSQL refuses to store, and when it takes two JSON values for equal: the
in-memory store's submissions check both as the real store's statements do."""

from __future__ import annotations

import math
from decimal import Decimal

from jobqueue.domain.fields import MAX_ATTEMPTS, MIN_ATTEMPTS, JsonValue
from jobqueue.domain.job import NewJob


def _refusal(new: NewJob) -> str | None:
    """Why PostgreSQL would refuse to store `new` (a check constraint, a character that
    `text` or `jsonb` cannot hold, a number JSON cannot spell), or None."""
    if not MIN_ATTEMPTS <= new.max_attempts <= MAX_ATTEMPTS:
        return f"max_attempts {new.max_attempts} violates the max_attempts check"
    for name, text in (
        ("type", new.type),
        ("idempotency_key", new.idempotency_key),
        ("traceparent", new.traceparent),
    ):
        if text is not None and not _storable_text(text):
            return f"{name} holds a character PostgreSQL cannot store"
    stack: list[object] = [new.payload]
    # Containers already walked: a hand-built NewJob may hold a cycle, which must not
    # hang the walk (the serialiser refuses it on the way to the database).
    walked: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, str) and not _storable_text(item):
            return "the payload holds a character PostgreSQL cannot store"
        if isinstance(item, float) and not math.isfinite(item):
            return f"the payload holds {item}, which JSON cannot represent"
        if isinstance(item, dict | list):
            if id(item) in walked:
                continue
            walked.add(id(item))
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _storable_text(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _jsonb(value: JsonValue) -> object:
    """A form in which two JSON values compare equal exactly when PostgreSQL's jsonb
    says so: numbers by value (1 = 1.0), booleans apart from numbers, keys unordered."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", Decimal(repr(value)))
    if isinstance(value, list):
        return ("array", tuple(_jsonb(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _jsonb(item)) for key, item in value.items()))
    return ("scalar", value)
