"""Go-style durations ("500ms", "30s", "1m30s", "1.5h"), used by configuration and payloads."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS_IN_MICROSECONDS = {
    "ns": 0.001,
    "us": 1,
    "µs": 1,
    "ms": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "h": 3_600_000_000,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_MAX = timedelta.max.total_seconds() * 1_000_000


def parse_duration(text: str) -> timedelta:
    """Parse a non-negative Go duration; raise `ValueError` saying what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"expected a duration string such as '30s', got {type(text).__name__}")
    raw = text.strip()
    if raw == "0":
        return timedelta(0)
    if not raw:
        raise ValueError("empty duration; use a form such as '500ms', '30s' or '1m30s'")
    position = 0
    micros = 0.0
    for match in _PART.finditer(raw):
        if match.start() != position:
            break
        micros += float(match.group(1)) * _UNITS_IN_MICROSECONDS[match.group(2)]
        position = match.end()
    if position != len(raw):
        raise ValueError(
            f"invalid duration {text!r}; use a number with a unit (ns, us, ms, s, m, h), "
            "as in '500ms', '30s' or '1m30s'"
        )
    if micros > _MAX:
        raise ValueError(f"duration {text!r} is too long")
    return timedelta(microseconds=micros)


def format_duration(value: timedelta) -> str:
    """Render a timedelta the way `parse_duration` reads it (e.g. '1m30s', '250ms')."""
    micros = round(value.total_seconds() * 1_000_000)
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, rest = divmod(rest, 1_000_000)
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if rest and not (hours or minutes or seconds):
        parts.append(f"{rest / 1000:g}ms")
    elif seconds or rest:
        parts.append(f"{seconds + rest / 1_000_000:g}s")
    return sign + "".join(parts)
