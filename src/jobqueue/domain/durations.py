"""Go-style durations ("500ms", "30s", "1m30s", "1.5h"), used by configuration and payloads."""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

_MICROSECOND = timedelta(microseconds=1)
# Exact fractions, not floats: beyond 2**53 microseconds (about 285 years) a float cannot
# hold every microsecond, and "1.1s" must mean 1,100,000 microseconds exactly.
_UNITS_IN_MICROSECONDS = {
    "ns": Fraction(1, 1_000),
    "us": Fraction(1),
    "µs": Fraction(1),  # U+00B5 MICRO SIGN
    "μs": Fraction(1),  # U+03BC GREEK SMALL LETTER MU; Go accepts both
    "ms": Fraction(1_000),
    "s": Fraction(1_000_000),
    "m": Fraction(60_000_000),
    "h": Fraction(3_600_000_000),
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_MAX_MICROSECONDS = timedelta.max // _MICROSECOND


def parse_duration(text: str) -> timedelta:
    """Parse a non-negative Go duration; raise `ValueError` saying what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"expected a duration string such as '30s', got {type(text).__name__}")
    raw = text.strip()
    if raw == "0":
        return timedelta(0)
    if not raw:
        raise ValueError("empty duration; use a form such as '500ms', '30s' or '1m30s'")
    if raw.startswith("-"):
        raise ValueError(f"invalid duration {text!r}; durations cannot be negative")
    position = 0
    micros = Fraction(0)
    for match in _PART.finditer(raw):
        if match.start() != position:
            break
        micros += Fraction(match.group(1)) * _UNITS_IN_MICROSECONDS[match.group(2)]
        position = match.end()
    if position != len(raw):
        raise ValueError(
            f"invalid duration {text!r}; use a number with a unit (ns, us, ms, s, m, h), "
            "as in '500ms', '30s' or '1m30s'"
        )
    rounded = round(micros)
    if rounded > _MAX_MICROSECONDS:
        raise ValueError(f"duration {text!r} is too long")
    return timedelta(microseconds=rounded)


def format_duration(value: timedelta) -> str:
    """Render a timedelta the way `parse_duration` reads it (e.g. '1m30s', '250ms')."""
    micros = value // _MICROSECOND
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
        parts.append(f"{rest}us" if rest < 1_000 else f"{_decimal(rest, 3)}ms")
    elif seconds or rest:
        parts.append(f"{_decimal(seconds * 1_000_000 + rest, 6)}s")
    return sign + "".join(parts)


def _decimal(count: int, places: int) -> str:
    """`count` / 10**places written exactly, without trailing zeros ('1.5', '30')."""
    whole, fraction = divmod(count, 10**places)
    if not fraction:
        return str(whole)
    return f"{whole}.{fraction:0{places}d}".rstrip("0")
