"""The settings' ranges and the rules between them: what makes a configuration unusable.

Checked on every `Settings`, however it was built, so that a bad combination stops the
process before it starts anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from jobqueue.domain.fields import MAX_ATTEMPTS, MIN_ATTEMPTS
from jobqueue.domain.outcome import MAX_SNOOZES
from jobqueue.entrypoints.config.variables import show

MAX_WORKERS = 10_000
MIN_BODY_BYTES = 64
MAX_BODY_BYTES = 1 << 30
# Past this, a process would run out of file descriptors under common limits first.
MAX_HTTP_CONNECTIONS = 100_000


def check(
    values: Mapping[str, Any], *, skip: frozenset[str], variables: Mapping[str, str]
) -> list[str]:
    """Range and consistency problems of a complete set of values.

    A check is skipped when a value it reads failed to parse (`skip`): its problem is
    reported already, and comparing against a default would only confuse. A problem
    starts with the variable (`variables`: attribute to variable name) of the first value
    it reads.
    """
    problems: list[str] = []

    def rule(attributes: tuple[str, ...], ok: Callable[..., bool], message: str) -> None:
        if skip.intersection(attributes):
            return
        read = [values[attribute] for attribute in attributes]
        if not ok(*read):
            problems.append(f"{variables[attributes[0]]}: {message.format(*map(show, read))}")

    rule(("workers",), lambda n: 1 <= n <= MAX_WORKERS, f"{{}} is not between 1 and {MAX_WORKERS}")
    rule(
        ("queues",),
        lambda queues: all(n is None or 1 <= n <= MAX_WORKERS for _, n in queues),
        f"each queue's number of jobs run at once must be between 1 and {MAX_WORKERS}",
    )
    rule(
        ("queues", "workers"),
        # Only once WORKERS itself is in range: its own problem is reported already.
        lambda queues, workers: (
            not 1 <= workers <= MAX_WORKERS
            or sum(workers if n is None else n for _, n in queues) <= MAX_WORKERS
        ),
        f"more than {MAX_WORKERS} jobs at once in all, over every queue",
    )
    rule(
        ("max_attempts",),
        lambda n: MIN_ATTEMPTS <= n <= MAX_ATTEMPTS,
        f"{{}} is not between {MIN_ATTEMPTS} and {MAX_ATTEMPTS}",
    )
    rule(
        ("max_snoozes",),
        lambda n: 0 <= n <= MAX_SNOOZES,
        f"{{}} is not between 0 and {MAX_SNOOZES}",
    )
    for attribute in (
        "job_timeout",
        "lease_duration",
        "statement_timeout",
        "db_client_timeout",
        "recovery_interval",
        "retention_interval",
        "poll_interval",
        "backoff_base",
        "http_read_timeout",
    ):
        rule((attribute,), _positive, "must be longer than 0, got {}")
    rule(
        ("db_client_timeout", "statement_timeout"),
        lambda client, statement: client > statement,
        f"{{}} must exceed {variables['statement_timeout']} ({{}}), so that the server "
        "cancels a slow statement before the client gives its connection up",
    )
    rule(
        ("lease_duration", "db_client_timeout"),
        lambda lease, client: lease > client * 3 / 2,
        f"{{}} must exceed 1.5 × {variables['db_client_timeout']} ({{}}): leases are "
        "renewed every third of LEASE_DURATION, and a renewal stuck for "
        f"{variables['db_client_timeout']} must leave time for the next before the "
        "lease runs out",
    )
    for attribute in ("retention_completed", "retention_failed"):
        rule(
            (attribute,),
            lambda age: age >= timedelta(0),
            "must not be negative, got {}; 0 keeps the jobs",
        )
    rule(
        ("backoff_max", "backoff_base"),
        lambda cap, base: cap >= base,
        f"{{}} is shorter than {variables['backoff_base']} ({{}})",
    )
    rule(
        ("http_max_connections",),
        lambda n: 1 <= n <= MAX_HTTP_CONNECTIONS,
        f"{{}} is not between 1 and {MAX_HTTP_CONNECTIONS}",
    )
    rule(
        ("max_body_bytes",),
        lambda n: MIN_BODY_BYTES <= n <= MAX_BODY_BYTES,
        f"{{}} is not between {MIN_BODY_BYTES} and {MAX_BODY_BYTES} bytes",
    )
    rule(
        ("database_pooler", "database_url"),
        lambda pooler, url: pooler.keeps_sessions or url is not None,
        f"{{}} needs {variables['database_url']}, the pooler's address (the embedded "
        "server is reached directly)",
    )
    # Both hold a session, which a transaction pooler gives another client after each
    # transaction: a LISTEN would hear nothing, a migration's advisory lock would never
    # be released.
    rule(
        ("database_pooler", "notify"),
        lambda pooler, notify: pooler.keeps_sessions or not notify,
        f"{{}} needs {variables['notify']}=false: LISTEN does not work through a "
        "transaction pooler (idle workers then find new jobs within POLL_INTERVAL)",
    )
    rule(
        ("database_pooler", "auto_migrate"),
        lambda pooler, migrate: pooler.keeps_sessions or not migrate,
        f"{{}} needs {variables['auto_migrate']}=false: migrations hold a session "
        "advisory lock, which a transaction pooler cannot keep; run `jobqueue migrate` "
        "against PostgreSQL itself first",
    )
    return problems


def _positive(value: timedelta) -> bool:
    return value > timedelta(0)


class ConfigError(ValueError):
    """The configuration cannot be used; `problems` says why, one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
