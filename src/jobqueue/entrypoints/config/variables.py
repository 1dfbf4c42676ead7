"""Environment variables: how one is declared (`setting`), parsed and shown.

`config.Settings` declares each of its fields with `setting(...)`; the settings table is
read back from those fields. A parser raises `ValueError` with a message that does not
name the variable: the table adds the name, so one parser serves several variables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, TypeVar

from jobqueue.adapters.postgres.pooler import Pooler
from jobqueue.adapters.telemetry.logging import LogFormat
from jobqueue.domain.durations import format_duration
from jobqueue.domain.fields import check_queue_name
from jobqueue.domain.flow import QueueLimits
from jobqueue.wire.tokens import first_unsendable

T = TypeVar("T")

Command = Literal["serve", "api", "worker", "migrate", "bench"]
COMMANDS: tuple[Command, ...] = ("serve", "api", "worker", "migrate", "bench")
ALL_COMMANDS: frozenset[Command] = frozenset(COMMANDS)
# `bench` reads DATABASE_URL alone: it logs its own way, and without DATABASE_URL it runs
# on a temporary embedded server, never on the one in JOBQUEUE_DATA_DIR.
EXCEPT_BENCH: frozenset[Command] = ALL_COMMANDS - {"bench"}
# The commands that run the service, those with the HTTP API, those with workers.
SERVICES: frozenset[Command] = frozenset({"serve", "api", "worker"})
WITH_API: frozenset[Command] = frozenset({"serve", "api"})
WITH_WORKERS: frozenset[Command] = frozenset({"serve", "worker"})
# The OTEL_* variables (TRACING_ENVIRONMENT) matter where the service runs.
TRACING_COMMANDS = SERVICES

# The key of a `setting` field's metadata that holds its row of the table.
SETTING_KEY = "jobqueue.setting"


def show(value: object) -> str:
    """A value the way its variable would be written (a default, or in a message)."""
    if value is None or (isinstance(value, tuple | frozenset) and not value):
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    return str(value)


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of the settings table: an environment variable and all said about it."""

    env: str
    parse: Callable[[str], object]
    default: object
    # The default as `--help` and the README show it.
    shown: str
    help: str
    commands: frozenset[Command]
    # The `Settings` field it is declared on; filled in when the table is read back.
    attribute: str = ""


def setting(
    env: str,
    parse: Callable[[str], T],
    default: T,
    help: str,
    *,
    commands: frozenset[Command],
    shown: str | Callable[[T], str] = show,
    secret: bool = False,
) -> T:
    """A dataclass field read from `env`: the one place a setting is declared.

    `shown` is the default as help shows it, or how to show it; `secret` keeps the
    value out of `repr`.
    """
    row = Setting(
        env=env,
        parse=parse,
        default=default,
        shown=shown if isinstance(shown, str) else shown(default),
        help=help,
        commands=commands,
    )
    return field(default=default, repr=not secret, metadata={SETTING_KEY: row})


# --- parsers ---------------------------------------------------------------------------

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The value of METRICS_ADDR that turns the separate metrics listener off.
METRICS_OFF: Literal["off"] = "off"


@dataclass(frozen=True, slots=True)
class HttpAddress:
    host: str
    port: int
    # As configured (":8080"), for messages that the operator will recognise.
    text: str

    def __str__(self) -> str:
        return self.text


def parse_http_addr(raw: str) -> HttpAddress:
    if raw.startswith("["):
        host, bracket, rest = raw[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise ValueError(f"{raw!r} is not host:port; write IPv6 hosts as [::1]:8080")
        port_text = rest[1:]
    else:
        host, colon, port_text = raw.rpartition(":")
        if not colon:
            raise ValueError(f"{raw!r} has no port; use host:port or :port, e.g. ':8080'")
        if ":" in host:
            raise ValueError(f"{raw!r}: write IPv6 hosts in brackets, as in [::1]:8080")
    if any(character.isspace() for character in host):
        raise ValueError(f"{raw!r}: the host contains whitespace")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{raw!r}: the port must be a number from 1 to 65535")
    return HttpAddress(host or "0.0.0.0", int(port_text), raw)


def parse_metrics_addr(raw: str) -> HttpAddress | Literal["off"]:
    if raw.lower() == METRICS_OFF:
        return METRICS_OFF
    try:
        return parse_http_addr(raw)
    except ValueError as error:
        raise ValueError(f"{error}; or {METRICS_OFF} for no metrics listener") from None


# `jobqueue worker` serves no API: without a listener of its own its metrics and probes
# would be invisible. serve and api have them on HTTP_ADDR already, so they open none.
WORKER_METRICS_ADDR = parse_http_addr(":9090")

# Unset HTTP_ADDR, by command. `serve` (and so `make run`) is for trying jobqueue out on
# one's own machine, with no API_TOKENS and the example types on: loopback only. `api` is
# the production role, often in a container, where loopback would make it unreachable.
SERVE_HTTP_ADDR = parse_http_addr("127.0.0.1:8080")
API_HTTP_ADDR = parse_http_addr(":8080")


def parse_bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{raw!r} is not a boolean; use true or false")


def parse_trace_url(raw: str) -> str:
    if "{trace_id}" not in raw:
        raise ValueError(f"{raw!r} has no {{trace_id}} for the trace's id to go in")
    if not raw.startswith(("https://", "http://")):
        raise ValueError(f"{raw!r} is not an http(s) URL")
    return raw


def read_environment(
    rows: Sequence[Setting], environ: Mapping[str, str]
) -> tuple[dict[str, Any], set[str], list[str]]:
    """Each row's variable parsed, by attribute; the attributes that failed to parse; and
    what was wrong with them. An empty variable is unset."""
    values: dict[str, Any] = {}
    failed: set[str] = set()
    problems: list[str] = []
    for row in rows:
        raw = environ.get(row.env, "").strip()
        if not raw:
            continue
        try:
            values[row.attribute] = row.parse(raw)
        except ValueError as error:
            problems.append(f"{row.env}: {error}")
            failed.add(row.attribute)
    return values, failed, problems


def parse_int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None


_SIZE = re.compile(r"(\d+)\s*([KMG]i?B|B)?", re.IGNORECASE)
_BINARY_UNITS = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10}
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9}
_SIZE_UNITS |= {unit.lower(): factor for unit, factor in _BINARY_UNITS.items()}


def parse_size(raw: str) -> int:
    match = _SIZE.fullmatch(raw)
    if match is None:
        raise ValueError(f"{raw!r} is not a size; use bytes or a unit, e.g. 1048576 or 1MiB")
    unit = (match.group(2) or "b").lower()
    return int(match.group(1)) * _SIZE_UNITS[unit]


def format_size(size: int) -> str:
    """A byte count the way `parse_size` reads it, in the largest binary unit that
    divides it ('1MiB', '1536KiB', '100')."""
    for unit, factor in _BINARY_UNITS.items():
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def parse_log_level(raw: str) -> str:
    level = raw.upper()
    if level == "WARN":
        return "WARNING"
    if level not in LOG_LEVELS:
        raise ValueError(f"{raw!r} is not a log level; use one of {', '.join(LOG_LEVELS)}")
    return level


def parse_log_format(raw: str) -> LogFormat:
    return _choice(LogFormat, raw, "a log format")


def parse_database_url(raw: str) -> str:
    # Imported here: SQLAlchemy takes long to import, and `--help` needs none of it.
    from jobqueue.adapters.postgres.database import normalize_url

    try:
        normalize_url(raw)
    except ValueError as error:
        # The message never repeats the URL: it may hold a password.
        raise ValueError(str(error)) from None
    return raw


def parse_pooler(raw: str) -> Pooler:
    return _choice(Pooler, raw, "a pooler")


Choice = TypeVar("Choice", bound=StrEnum)


def _choice(kind: type[Choice], raw: str, what: str) -> Choice:
    """`raw` as one of `kind`'s values, in any case."""
    try:
        return kind(raw.lower())
    except ValueError:
        choices = " or ".join(each.value for each in kind)
        raise ValueError(f"{raw!r} is not {what}; use {choices}") from None


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def parse_modules(raw: str) -> tuple[str, ...]:
    modules = tuple(part.strip() for part in raw.split(",") if part.strip())
    for module in modules:
        if not _MODULE.fullmatch(module):
            raise ValueError(f"{module!r} is not a module path such as 'mypackage.jobs'")
    return modules


# A queue a worker process consumes, and how many of its jobs it runs at once (None: the
# WORKERS setting's number).
QueueConcurrency = tuple[str, int | None]


def parse_queues(raw: str) -> tuple[QueueConcurrency, ...]:
    """`default=10,emails=2` (or `default,emails=2`: WORKERS for a queue given no number)."""
    queues: list[QueueConcurrency] = []
    for part in (piece.strip() for piece in raw.split(",")):
        if not part:
            continue
        name, equals, count = (each.strip() for each in part.partition("="))
        check_queue_name(name)
        if any(name == seen for seen, _ in queues):
            raise ValueError(f"queue {name!r} is listed twice")
        if not equals:
            queues.append((name, None))
            continue
        try:
            queues.append((name, int(count)))
        except ValueError:
            raise ValueError(
                f"{part!r}: the number of jobs run at once must be a whole number, as in "
                f"'{name}=10'"
            ) from None
    if not queues:
        raise ValueError("names no queue; use a form such as 'default=10,emails=2'")
    return tuple(queues)


# A queue's limits as settings declare them (QUEUE_LIMITS).
QueueLimitsEntry = tuple[str, QueueLimits]


def parse_queue_limits(raw: str) -> tuple[QueueLimitsEntry, ...]:
    """`emails concurrency=5 rate=100/1m; reports concurrency=2`: a queue's name, then its
    limits; queues apart by semicolons. `none`: none."""
    declared: list[QueueLimitsEntry] = []
    if raw.strip() == "none":
        return ()
    for part in (piece.strip() for piece in raw.split(";")):
        if not part:
            continue
        name, _, limits = part.partition(" ")
        check_queue_name(name)
        if any(name == seen for seen, _ in declared):
            raise ValueError(f"queue {name!r} is listed twice")
        try:
            declared.append((name, QueueLimits.parse(limits)))
        except ValueError as error:
            raise ValueError(f"queue {name!r}: {error}") from None
    return tuple(declared)


def show_queue_limits(declared: tuple[QueueLimitsEntry, ...]) -> str:
    return "; ".join(f"{name} {limits}" for name, limits in declared) or "none"


def show_queues(queues: tuple[QueueConcurrency, ...]) -> str:
    return ",".join(name if count is None else f"{name}={count}" for name, count in queues)


def parse_tokens(raw: str) -> frozenset[str]:
    tokens = [part.strip() for part in raw.split(",") if part.strip()]
    if not tokens:
        raise ValueError("holds no token; unset it to turn authentication off")
    for position, token in enumerate(tokens, start=1):
        # Tokens are never echoed: they are secrets. Their position is enough.
        if first_unsendable(token) is not None:
            raise ValueError(
                f"token {position} contains characters other than visible ASCII; an "
                "Authorization header cannot carry it"
            )
    return frozenset(tokens)


def parse_path(raw: str) -> Path:
    return Path(raw).expanduser()
