"""Settings from the environment: every variable's parsing and every refusal."""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta
from pathlib import Path

import pytest

from jobqueue.adapters.postgres.limits import Limits
from jobqueue.adapters.postgres.pooler import Pooler
from jobqueue.adapters.telemetry.logging import LogFormat
from jobqueue.adapters.telemetry.tracing_config import TRACING_ENVIRONMENT
from jobqueue.domain.backoff import Backoff
from jobqueue.domain.flow import QueueLimits
from jobqueue.domain.status import Status
from jobqueue.entrypoints.cli.main import build_parser
from jobqueue.entrypoints.config.listeners import api_listener, metrics_listener
from jobqueue.entrypoints.config.settings import (
    SETTINGS,
    ConfigError,
    HttpAddress,
    Settings,
)
from jobqueue.entrypoints.config.variables import (
    COMMANDS,
    TRACING_COMMANDS,
    Command,
    Setting,
    format_size,
    parse_size,
)
from jobqueue.entrypoints.service.compose import http_config
from jobqueue.entrypoints.worker.pool_config import concurrency, pool_config, pool_configs


def problems_of(environ: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(environ)
    return caught.value.problems


def test_an_empty_environment_gives_the_documented_defaults() -> None:
    settings = Settings.from_env({})

    assert settings.database_url is None
    assert settings.data_dir == Path(".jobqueue/pgdata")
    assert settings.http_addr is None  # the command's default: api_listener
    assert settings.metrics_addr is None
    assert settings.workers == 4
    assert settings.max_attempts == 5
    assert settings.job_timeout == timedelta(seconds=30)
    assert settings.lease_duration == timedelta(seconds=30)
    assert settings.statement_timeout == timedelta(seconds=5)
    assert settings.db_client_timeout == timedelta(seconds=6)
    assert settings.recovery_interval == timedelta(seconds=30)
    assert settings.retention_completed == timedelta(hours=168)
    assert settings.retention_failed == timedelta(hours=720)
    assert settings.retention_interval == timedelta(minutes=1)
    assert settings.poll_interval == timedelta(seconds=1)
    assert settings.notify is True
    assert settings.backoff_base == timedelta(seconds=1)
    assert settings.backoff_max == timedelta(minutes=5)
    assert settings.shutdown_timeout == timedelta(seconds=20)
    assert settings.drain_delay == timedelta(0)
    assert settings.max_body_bytes == 1024 * 1024
    assert settings.result_max_bytes == 1024 * 1024
    assert settings.webhook_allow_private is False
    assert settings.log_level == "INFO"
    assert settings.auto_migrate is True
    assert settings.handler_modules == ()
    assert settings.api_tokens == frozenset()
    assert settings.dashboard_read_only is False
    assert settings.trace_url is None


def test_every_documented_variable_is_read() -> None:
    # A variable listed in --help but never parsed would be silently ignored.
    environ = {
        "DATABASE_URL": "postgresql://u:p@db:5432/jobs",
        "DATABASE_POOLER": "pgbouncer",
        "JOBQUEUE_DATA_DIR": "/var/lib/jq",
        "HTTP_ADDR": "127.0.0.1:9000",
        "METRICS_ADDR": "127.0.0.1:9100",
        "WORKERS": "8",
        "QUEUES": "default=3,emails",
        "QUEUE_LIMITS": "emails concurrency=2",
        "MAX_ATTEMPTS": "7",
        "JOB_TIMEOUT": "10s",
        "MAX_SNOOZES": "12",
        "RESULT_MAX_BYTES": "64KiB",
        "LEASE_DURATION": "20s",
        "STATEMENT_TIMEOUT": "2s",
        "DB_CLIENT_TIMEOUT": "3s",
        "RECOVERY_INTERVAL": "5s",
        "RETENTION_COMPLETED": "24h",
        "RETENTION_FAILED": "0",
        "RETENTION_INTERVAL": "10m",
        "POLL_INTERVAL": "250ms",
        "NOTIFY": "false",
        "BACKOFF_BASE": "2s",
        "BACKOFF_MAX": "1m",
        "SHUTDOWN_TIMEOUT": "3s",
        "DRAIN_DELAY": "4s",
        "MAX_BODY_BYTES": "2048",
        "HTTP_READ_TIMEOUT": "3s",
        "HTTP_MAX_CONNECTIONS": "64",
        "BUILTIN_HANDLERS": "false",
        "WEBHOOK_ALLOW_PRIVATE": "true",
        "LOG_LEVEL": "debug",
        "LOG_FORMAT": "TEXT",
        "AUTO_MIGRATE": "false",
        "JOBQUEUE_HANDLERS": "a.b",
        "API_TOKENS": "t1",
        "DASHBOARD_READ_ONLY": "yes",
        "TRACE_URL": "https://traces.example/t/{trace_id}",
    }
    assert set(environ) == {row.env for row in SETTINGS}

    settings = Settings.from_env(environ)

    assert settings.database_url == "postgresql://u:p@db:5432/jobs"
    assert settings.database_pooler is Pooler.PGBOUNCER
    assert settings.data_dir == Path("/var/lib/jq")
    assert settings.http_addr == HttpAddress("127.0.0.1", 9000, "127.0.0.1:9000")
    assert settings.metrics_addr == HttpAddress("127.0.0.1", 9100, "127.0.0.1:9100")
    assert settings.workers == 8
    assert settings.queues == (("default", 3), ("emails", None))
    assert concurrency(settings) == {"default": 3, "emails": 8}
    assert settings.queue_limits == (("emails", QueueLimits(concurrency=2)),)
    assert settings.max_attempts == 7
    assert settings.job_timeout == timedelta(seconds=10)
    assert settings.max_snoozes == 12
    assert pool_config(settings).max_snoozes == 12
    assert pool_config(settings).result_max_bytes == 64 * 1024
    assert settings.lease_duration == timedelta(seconds=20)
    assert settings.statement_timeout == timedelta(seconds=2)
    assert settings.db_client_timeout == timedelta(seconds=3)
    assert settings.recovery_interval == timedelta(seconds=5)
    assert settings.retention_completed == timedelta(hours=24)
    assert settings.retention_failed == timedelta(0)
    assert settings.retention_interval == timedelta(minutes=10)
    assert settings.poll_interval == timedelta(milliseconds=250)
    assert settings.notify is False
    assert settings.backoff_base == timedelta(seconds=2)
    assert settings.backoff_max == timedelta(minutes=1)
    assert settings.shutdown_timeout == timedelta(seconds=3)
    assert settings.drain_delay == timedelta(seconds=4)
    assert settings.max_body_bytes == 2048
    assert settings.http_read_timeout == timedelta(seconds=3)
    assert settings.http_max_connections == 64
    assert settings.builtin_handlers is False
    assert settings.webhook_allow_private is True
    assert settings.log_level == "DEBUG"
    assert settings.log_format is LogFormat.TEXT
    assert settings.auto_migrate is False
    assert settings.handler_modules == ("a.b",)
    assert settings.api_tokens == frozenset({"t1"})
    assert settings.dashboard_read_only is True
    assert settings.trace_url == "https://traces.example/t/{trace_id}"
    assert http_config(settings).read_only is True


def test_empty_and_blank_values_count_as_unset() -> None:
    settings = Settings.from_env({"DATABASE_URL": "", "WORKERS": "  ", "API_TOKENS": ""})

    assert settings.database_url is None
    assert settings.workers == 4
    assert settings.api_tokens == frozenset()


# --- the settings table ----------------------------------------------------------------


def test_every_field_but_tracing_is_one_row_of_the_table() -> None:
    assert [row.attribute for row in SETTINGS] == [
        f.name for f in fields(Settings) if f.name != "tracing"
    ]
    assert len({row.env for row in SETTINGS}) == len(SETTINGS)
    assert all(row.commands and row.help for row in SETTINGS)


def test_each_default_is_the_field_default() -> None:
    defaults = Settings()

    for row in SETTINGS:
        assert getattr(defaults, row.attribute) == row.default, row.env


@pytest.mark.parametrize(
    "row", [row for row in SETTINGS if row.shown != "unset"], ids=lambda row: row.env
)
def test_a_default_as_help_shows_it_reads_back_as_the_default(row: Setting) -> None:
    # METRICS_ADDR's, HTTP_ADDR's and LOG_FORMAT's defaults depend on the command and on
    # stdout: help says so in words.
    if row.env == "METRICS_ADDR":
        assert row.shown == ":9090 for worker, none for serve/api"
        return
    if row.env == "HTTP_ADDR":
        assert row.shown == "127.0.0.1:8080 for serve, :8080 for api"
        return
    if row.env == "LOG_FORMAT":
        assert row.default is None
        return

    assert row.parse(row.shown) == row.default


@pytest.mark.parametrize("size", [64, 1000, 1 << 10, 1536 << 10, 1 << 20, 3 << 30])
def test_sizes_are_shown_the_way_they_are_read(size: int) -> None:
    assert parse_size(format_size(size)) == size


def test_a_size_is_shown_in_the_largest_unit_that_divides_it() -> None:
    assert [format_size(n) for n in (1 << 20, 1536 << 10, 1000, 0)] == [
        "1MiB",
        "1536KiB",
        "1000",
        "0",
    ]


def help_of(command: Command | None, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"] if command is None else [command, "--help"])
    return capsys.readouterr().out


def listed(help_text: str) -> list[str]:
    """The variables in the environment and tracing sections of a help text, in order."""
    names = []
    for line in help_text.splitlines():
        words = line.split()
        if line.startswith("  ") and words and words[0].isupper() and "[default:" in line:
            names.append(words[0])
    return names


def test_the_top_level_help_lists_every_setting_then_the_tracing_variables(
    capsys: pytest.CaptureFixture[str],
) -> None:
    help_text = help_of(None, capsys)

    assert listed(help_text) == [row.env for row in SETTINGS] + [
        name for name, _, _ in TRACING_ENVIRONMENT
    ]
    for row in SETTINGS:
        assert f"{row.help} [default: {row.shown}]" in help_text


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_help_lists_only_the_settings_the_command_uses(
    command: Command, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = [row.env for row in SETTINGS if command in row.commands]
    if command in TRACING_COMMANDS:
        expected += [name for name, _, _ in TRACING_ENVIRONMENT]

    assert listed(help_of(command, capsys)) == expected


@pytest.mark.parametrize(
    ("command", "absent"),
    [
        ("worker", "HTTP_ADDR"),
        ("worker", "API_TOKENS"),
        ("api", "WORKERS"),
        ("migrate", "NOTIFY"),
        ("bench", "JOBQUEUE_DATA_DIR"),
    ],
)
def test_settings_a_command_does_not_use_stay_out_of_its_help(
    command: Command, absent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert absent not in listed(help_of(command, capsys))


# --- one variable at a time ------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("postgres://u@h/db", "postgres://u@h/db"),
        ("postgresql://u:secret@h:5432/db", "postgresql://u:secret@h:5432/db"),
        ("postgresql+asyncpg://u@/db?host=/tmp/sock", "postgresql+asyncpg://u@/db?host=/tmp/sock"),
    ],
)
def test_database_url_accepts_postgresql_urls(raw: str, expected: str) -> None:
    assert Settings.from_env({"DATABASE_URL": raw}).database_url == expected


@pytest.mark.parametrize("raw", ["mysql://u:secret@h/db", "not a url", "sqlite:///x.db"])
def test_database_url_refuses_other_urls_without_echoing_them(raw: str) -> None:
    [problem] = problems_of({"DATABASE_URL": raw})

    assert problem.startswith("DATABASE_URL: must be a PostgreSQL URL")
    assert "secret" not in problem


def test_data_dir_expands_the_home_directory() -> None:
    settings = Settings.from_env({"JOBQUEUE_DATA_DIR": "~/jq"})

    assert settings.data_dir == Path("~/jq").expanduser()


@pytest.mark.parametrize(
    ("raw", "host", "port"),
    [
        (":8080", "0.0.0.0", 8080),
        ("127.0.0.1:1", "127.0.0.1", 1),
        ("localhost:65535", "localhost", 65535),
        ("[::1]:9000", "::1", 9000),
        ("[::]:80", "::", 80),
    ],
)
def test_http_addr_forms(raw: str, host: str, port: int) -> None:
    address = Settings.from_env({"HTTP_ADDR": raw}).http_addr

    assert (address.host, address.port, str(address)) == (host, port, raw)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("8080", "has no port"),
        ("localhost", "has no port"),
        (":0", "the port must be a number from 1 to 65535"),
        (":65536", "the port must be a number from 1 to 65535"),
        (":http", "the port must be a number from 1 to 65535"),
        ("host:", "the port must be a number from 1 to 65535"),
        ("::1:8080", "write IPv6 hosts in brackets"),
        ("[::1]8080", "write IPv6 hosts as [::1]:8080"),
        ("my host:80", "the host contains whitespace"),
    ],
)
def test_http_addr_refusals(raw: str, why: str) -> None:
    [problem] = problems_of({"HTTP_ADDR": raw})

    assert problem.startswith("HTTP_ADDR: ")
    assert why in problem


def test_unset_http_addr_is_loopback_for_serve_and_every_interface_for_api() -> None:
    settings = Settings.from_env({})
    serve, api = (api_listener(settings, with_workers=workers) for workers in (True, False))

    assert serve == HttpAddress("127.0.0.1", 8080, "127.0.0.1:8080")
    assert api == HttpAddress("0.0.0.0", 8080, ":8080")


@pytest.mark.parametrize("with_workers", [True, False])
def test_a_configured_http_addr_is_used_by_serve_and_api(with_workers: bool) -> None:
    settings = Settings.from_env({"HTTP_ADDR": ":8080"})

    assert api_listener(settings, with_workers=with_workers) == HttpAddress(
        "0.0.0.0", 8080, ":8080"
    )


def test_unset_metrics_addr_gives_a_worker_its_own_listener_on_9090() -> None:
    settings = Settings.from_env({})

    assert metrics_listener(settings, serves_api=False) == HttpAddress("0.0.0.0", 9090, ":9090")


def test_unset_metrics_addr_opens_no_extra_listener_beside_the_api() -> None:
    # serve and api already answer /metrics, /healthz and /readyz on HTTP_ADDR.
    assert metrics_listener(Settings.from_env({}), serves_api=True) is None


@pytest.mark.parametrize("serves_api", [False, True])
def test_a_configured_metrics_addr_is_used_with_or_without_the_api(serves_api: bool) -> None:
    settings = Settings.from_env({"METRICS_ADDR": "127.0.0.1:9100"})

    listener = metrics_listener(settings, serves_api=serves_api)

    assert listener == HttpAddress("127.0.0.1", 9100, "127.0.0.1:9100")


@pytest.mark.parametrize("raw", ["off", "OFF", " Off "])
@pytest.mark.parametrize("serves_api", [False, True])
def test_metrics_addr_off_opens_no_metrics_listener(raw: str, serves_api: bool) -> None:
    settings = Settings.from_env({"METRICS_ADDR": raw})

    assert settings.metrics_addr == "off"
    assert metrics_listener(settings, serves_api=serves_api) is None


def test_an_empty_metrics_addr_counts_as_unset_not_as_off() -> None:
    # Like every variable: a template rendering an empty value must not silently hide
    # a worker's metrics.
    settings = Settings.from_env({"METRICS_ADDR": ""})

    assert metrics_listener(settings, serves_api=False) == HttpAddress("0.0.0.0", 9090, ":9090")


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("9090", "has no port"),
        (":0", "the port must be a number from 1 to 65535"),
        ("::1:9090", "write IPv6 hosts in brackets"),
        ("false", "has no port"),
        ("no", "has no port"),
    ],
)
def test_metrics_addr_refusals_name_the_variable_and_the_off_switch(raw: str, why: str) -> None:
    [problem] = problems_of({"METRICS_ADDR": raw})

    assert problem.startswith("METRICS_ADDR: ")
    assert why in problem
    assert problem.endswith("; or off for no metrics listener")


def test_metrics_addr_accepts_the_forms_of_http_addr() -> None:
    settings = Settings.from_env({"METRICS_ADDR": "[::1]:9100"})

    assert settings.metrics_addr == HttpAddress("::1", 9100, "[::1]:9100")


@pytest.mark.parametrize(
    ("name", "attribute", "low", "high"),
    [("WORKERS", "workers", 1, 10_000), ("MAX_ATTEMPTS", "max_attempts", 1, 100)],
)
def test_integer_variables_accept_their_whole_range(
    name: str, attribute: str, low: int, high: int
) -> None:
    assert getattr(Settings.from_env({name: str(low)}), attribute) == low
    assert getattr(Settings.from_env({name: str(high)}), attribute) == high


@pytest.mark.parametrize(
    ("name", "raw", "why"),
    [
        ("WORKERS", "four", "'four' is not a whole number"),
        ("WORKERS", "2.5", "'2.5' is not a whole number"),
        ("WORKERS", "0", "0 is not between 1 and 10000"),
        ("WORKERS", "-3", "-3 is not between 1 and 10000"),
        ("WORKERS", "10001", "10001 is not between 1 and 10000"),
        ("MAX_ATTEMPTS", "0", "0 is not between 1 and 100"),
        ("MAX_ATTEMPTS", "101", "101 is not between 1 and 100"),
        ("MAX_ATTEMPTS", "many", "'many' is not a whole number"),
    ],
)
def test_integer_variable_refusals(name: str, raw: str, why: str) -> None:
    assert problems_of({name: raw}) == [f"{name}: {why}"]


DURATIONS = [
    ("JOB_TIMEOUT", "job_timeout"),
    ("LEASE_DURATION", "lease_duration"),
    ("STATEMENT_TIMEOUT", "statement_timeout"),
    ("DB_CLIENT_TIMEOUT", "db_client_timeout"),
    ("RECOVERY_INTERVAL", "recovery_interval"),
    ("RETENTION_COMPLETED", "retention_completed"),
    ("RETENTION_FAILED", "retention_failed"),
    ("RETENTION_INTERVAL", "retention_interval"),
    ("POLL_INTERVAL", "poll_interval"),
    ("BACKOFF_BASE", "backoff_base"),
    ("BACKOFF_MAX", "backoff_max"),
    ("SHUTDOWN_TIMEOUT", "shutdown_timeout"),
    ("DRAIN_DELAY", "drain_delay"),
]


@pytest.mark.parametrize(("name", "attribute"), DURATIONS)
def test_durations_are_read_in_go_form(name: str, attribute: str) -> None:
    environ = {name: "1h2m3.5s"}
    # Keep the cross-checks satisfied: the client outwaits the server, the lease leaves
    # time for a stuck renewal, the backoff cap is not below its base.
    if name == "STATEMENT_TIMEOUT":
        environ |= {"DB_CLIENT_TIMEOUT": "2h", "LEASE_DURATION": "4h"}
    if name == "DB_CLIENT_TIMEOUT":
        environ["LEASE_DURATION"] = "2h"
    if name == "BACKOFF_BASE":
        environ["BACKOFF_MAX"] = "2h"

    settings = Settings.from_env(environ)

    assert getattr(settings, attribute) == timedelta(hours=1, minutes=2, seconds=3.5)


@pytest.mark.parametrize(("name", "attribute"), DURATIONS)
def test_durations_without_a_unit_are_refused(name: str, attribute: str) -> None:
    [problem] = problems_of({name: "30"})

    assert problem.startswith(f"{name}: invalid duration '30'")


@pytest.mark.parametrize(
    "name",
    [
        "JOB_TIMEOUT",
        "LEASE_DURATION",
        "STATEMENT_TIMEOUT",
        "DB_CLIENT_TIMEOUT",
        "RECOVERY_INTERVAL",
        "RETENTION_INTERVAL",
        "POLL_INTERVAL",
        "BACKOFF_BASE",
    ],
)
def test_durations_that_must_be_positive_refuse_zero(name: str) -> None:
    problems = problems_of({name: "0s"})

    assert f"{name}: must be longer than 0, got 0s" in problems


@pytest.mark.parametrize("name", ["SHUTDOWN_TIMEOUT", "DRAIN_DELAY"])
def test_shutdown_timeout_and_drain_delay_may_be_zero(name: str) -> None:
    attribute = name.lower()

    assert getattr(Settings.from_env({name: "0"}), attribute) == timedelta(0)


def test_negative_durations_are_refused() -> None:
    [problem] = problems_of({"DRAIN_DELAY": "-1s"})

    assert problem.startswith("DRAIN_DELAY: invalid duration '-1s'; durations cannot be negative")


def test_an_attempt_may_outlast_its_lease_since_the_lease_is_renewed() -> None:
    settings = Settings.from_env({"JOB_TIMEOUT": "3h", "LEASE_DURATION": "10s"})

    assert (settings.job_timeout, settings.lease_duration) == (
        timedelta(hours=3),
        timedelta(seconds=10),
    )


@pytest.mark.parametrize("lease", ["9s", "5s", "8.999s"])
def test_lease_duration_must_exceed_one_and_a_half_client_timeouts(lease: str) -> None:
    [problem] = problems_of({"DB_CLIENT_TIMEOUT": "6s", "LEASE_DURATION": lease})

    assert problem.startswith(
        f"LEASE_DURATION: {lease} must exceed 1.5 × DB_CLIENT_TIMEOUT (6s): leases are renewed"
    )


def test_a_lease_just_over_one_and_a_half_client_timeouts_is_accepted() -> None:
    settings = Settings.from_env({"DB_CLIENT_TIMEOUT": "6s", "LEASE_DURATION": "9.001s"})

    assert settings.lease_duration == timedelta(seconds=9.001)


def test_the_default_lease_is_checked_against_a_configured_client_timeout() -> None:
    [problem] = problems_of({"DB_CLIENT_TIMEOUT": "20s", "STATEMENT_TIMEOUT": "10s"})

    assert problem.startswith("LEASE_DURATION: 30s must exceed 1.5 × DB_CLIENT_TIMEOUT (20s)")


@pytest.mark.parametrize("client", ["5s", "4s"])
def test_the_client_timeout_must_exceed_the_statement_timeout(client: str) -> None:
    [problem] = problems_of({"STATEMENT_TIMEOUT": "5s", "DB_CLIENT_TIMEOUT": client})

    assert problem.startswith(
        f"DB_CLIENT_TIMEOUT: {client} must exceed STATEMENT_TIMEOUT (5s), so that the server"
    )


def test_database_limits_speak_the_server_s_unit() -> None:
    limits = Limits(statement=timedelta(seconds=1), client=timedelta(seconds=2))

    assert limits.statement_milliseconds == 1000


def test_backoff_max_below_backoff_base_is_refused() -> None:
    assert problems_of({"BACKOFF_BASE": "10s", "BACKOFF_MAX": "5s"}) == [
        "BACKOFF_MAX: 5s is shorter than BACKOFF_BASE (10s)"
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2048", 2048),
        ("64", 64),
        ("512KiB", 512 * 1024),
        ("1MiB", 1024 * 1024),
        ("1 mib", 1024 * 1024),
        ("1MB", 1_000_000),
        ("10kb", 10_000),
        ("1GiB", 1 << 30),
        ("100B", 100),
    ],
)
def test_max_body_bytes_accepts_bytes_and_units(raw: str, expected: int) -> None:
    assert Settings.from_env({"MAX_BODY_BYTES": raw}).max_body_bytes == expected


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("lots", "'lots' is not a size"),
        ("1.5MiB", "'1.5MiB' is not a size"),
        ("-5", "'-5' is not a size"),
        ("10", "10 is not between 64 and 1073741824 bytes"),
        ("2GiB", "2147483648 is not between 64 and 1073741824 bytes"),
    ],
)
def test_max_body_bytes_refusals(raw: str, why: str) -> None:
    [problem] = problems_of({"MAX_BODY_BYTES": raw})

    assert problem.startswith(f"MAX_BODY_BYTES: {why}")


@pytest.mark.parametrize("name", ["WEBHOOK_ALLOW_PRIVATE", "AUTO_MIGRATE", "NOTIFY"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("off", False),
    ],
)
def test_booleans(name: str, raw: str, expected: bool) -> None:
    assert getattr(Settings.from_env({name: raw}), name.lower()) is expected


@pytest.mark.parametrize("name", ["WEBHOOK_ALLOW_PRIVATE", "AUTO_MIGRATE", "NOTIFY"])
def test_boolean_refusal(name: str) -> None:
    assert problems_of({name: "maybe"}) == [f"{name}: 'maybe' is not a boolean; use true or false"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("debug", "DEBUG"), ("INFO", "INFO"), ("warn", "WARNING"), ("Error", "ERROR")],
)
def test_log_levels(raw: str, expected: str) -> None:
    assert Settings.from_env({"LOG_LEVEL": raw}).log_level == expected


def test_an_unknown_log_level_is_refused() -> None:
    [problem] = problems_of({"LOG_LEVEL": "chatty"})

    assert problem == (
        "LOG_LEVEL: 'chatty' is not a log level; use one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
    )


def test_handler_modules_are_a_comma_separated_list() -> None:
    settings = Settings.from_env({"JOBQUEUE_HANDLERS": " app.jobs, other_pkg.handlers ,,"})

    assert settings.handler_modules == ("app.jobs", "other_pkg.handlers")


@pytest.mark.parametrize("raw", ["app/jobs.py", "app..jobs", "1app", "app.jobs:registry"])
def test_handler_modules_must_be_module_paths(raw: str) -> None:
    [problem] = problems_of({"JOBQUEUE_HANDLERS": raw})

    assert problem.startswith("JOBQUEUE_HANDLERS: ")
    assert "is not a module path such as 'mypackage.jobs'" in problem


def test_api_tokens_are_a_comma_separated_set() -> None:
    settings = Settings.from_env({"API_TOKENS": "alpha, beta,alpha"})

    assert settings.api_tokens == frozenset({"alpha", "beta"})


def test_api_tokens_that_hold_no_token_are_refused() -> None:
    assert problems_of({"API_TOKENS": " , ,"}) == [
        "API_TOKENS: holds no token; unset it to turn authentication off"
    ]


def test_api_tokens_with_characters_a_header_cannot_carry_are_refused_without_echoing() -> None:
    [problem] = problems_of({"API_TOKENS": "good,s3cret wörd"})

    assert problem.startswith("API_TOKENS: token 2 contains characters other than visible ASCII")
    assert "s3cret" not in problem


# --- all at once -----------------------------------------------------------------------


def test_every_problem_is_reported_at_once_one_per_line() -> None:
    problems = problems_of(
        {
            "WORKERS": "0",
            "HTTP_ADDR": "nope",
            "DB_CLIENT_TIMEOUT": "forever",
            "LEASE_DURATION": "1s",
            "LOG_LEVEL": "loud",
        }
    )

    assert [problem.split(":", 1)[0] for problem in problems] == [
        "HTTP_ADDR",
        "DB_CLIENT_TIMEOUT",
        "LOG_LEVEL",
        "WORKERS",
    ]
    assert str(ConfigError(problems)) == "\n".join(problems)


def test_a_cross_check_is_skipped_when_one_side_failed_to_parse() -> None:
    # DB_CLIENT_TIMEOUT is broken: comparing the lease against its default would mislead.
    problems = problems_of({"DB_CLIENT_TIMEOUT": "soon", "LEASE_DURATION": "5s"})

    assert [problem.split(":", 1)[0] for problem in problems] == ["DB_CLIENT_TIMEOUT"]


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings(lease_duration=timedelta(seconds=9))

    assert caught.value.problems[0].startswith("LEASE_DURATION: 9s must exceed")


def test_secrets_stay_out_of_the_settings_repr() -> None:
    settings = Settings.from_env(
        {"DATABASE_URL": "postgresql://u:hunter2@h/db", "API_TOKENS": "tok-123"}
    )

    assert "hunter2" not in repr(settings)
    assert "tok-123" not in repr(settings)


def test_pool_config_carries_the_worker_settings() -> None:
    settings = Settings.from_env(
        {
            "WORKERS": "3",
            "JOB_TIMEOUT": "7s",
            "LEASE_DURATION": "13s",
            "POLL_INTERVAL": "100ms",
            "SHUTDOWN_TIMEOUT": "9s",
            "BACKOFF_BASE": "2s",
            "BACKOFF_MAX": "1m",
        }
    )

    config = pool_config(settings)

    assert config.workers == 3
    assert config.job_timeout == timedelta(seconds=7)
    assert config.lease_duration == timedelta(seconds=13)
    assert config.poll_interval == timedelta(milliseconds=100)
    assert config.shutdown_timeout == timedelta(seconds=9)
    assert config.backoff == Backoff(timedelta(seconds=2), timedelta(minutes=1))
    # Each outcome write is bounded like every other statement of the service.
    assert config.outcome_timeout == settings.db_client_timeout


def test_retention_policy_keeps_finished_jobs_for_the_configured_times() -> None:
    settings = Settings.from_env({"RETENTION_COMPLETED": "1h30m", "RETENTION_FAILED": "240h"})

    assert settings.retention_policy().ages == {
        Status.COMPLETED: timedelta(hours=1, minutes=30),
        Status.FAILED: timedelta(days=10),
        Status.CANCELLED: timedelta(days=10),
    }


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("RETENTION_COMPLETED", {Status.COMPLETED}),
        ("RETENTION_FAILED", {Status.FAILED, Status.CANCELLED}),
    ],
)
def test_a_zero_retention_keeps_those_jobs_forever(name: str, kept: set[Status]) -> None:
    ages = Settings.from_env({name: "0"}).retention_policy().ages

    assert kept.isdisjoint(ages)
    assert set(ages) | kept == {Status.COMPLETED, Status.FAILED, Status.CANCELLED}


def test_retention_in_days_is_refused_with_the_units_go_accepts() -> None:
    [problem] = problems_of({"RETENTION_COMPLETED": "7d"})

    assert problem.startswith(
        "RETENTION_COMPLETED: invalid duration '7d'; use a number with a unit"
    )


@pytest.mark.parametrize("name", ["RETENTION_COMPLETED", "RETENTION_FAILED"])
def test_negative_retention_is_refused(name: str) -> None:
    [problem] = problems_of({name: "-1h"})

    assert problem.startswith(f"{name}: invalid duration '-1h'; durations cannot be negative")


def test_negative_retention_is_refused_on_direct_construction_too() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings(retention_failed=timedelta(seconds=-1))

    assert caught.value.problems == [
        "RETENTION_FAILED: must not be negative, got -1s; 0 keeps the jobs"
    ]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("default=x", "QUEUES: 'default=x': the number of jobs run at once must be a whole number"),
        ("default=0", "QUEUES: each queue's number of jobs run at once must be between 1 and"),
        ("a,b,a=2", "QUEUES: queue 'a' is listed twice"),
        (" , ", "QUEUES: names no queue; use a form such as 'default=10,emails=2'"),
        ("no spaces=1", "QUEUES: queue name must be 1 to 64 letters, digits or '_.:-'"),
        ("a=6000,b=6000", "QUEUES: more than 10000 jobs at once in all, over every queue"),
    ],
)
def test_queues_refusals_say_what_to_change(raw: str, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"QUEUES": raw})
    assert [p for p in refused.value.problems if p.startswith(problem)], refused.value.problems


def test_without_queues_a_process_consumes_the_default_queue_with_workers() -> None:
    settings = Settings.from_env({"WORKERS": "6"})
    assert [(c.queue, c.workers) for c in pool_configs(settings)] == [("default", 6)]


def test_a_trace_url_needs_its_trace_id_and_http() -> None:
    with pytest.raises(ConfigError, match=r"TRACE_URL: .* has no \{trace_id\}"):
        Settings.from_env({"TRACE_URL": "https://tempo.example/trace/"})
    with pytest.raises(ConfigError, match=r"TRACE_URL: .* is not an http"):
        Settings.from_env({"TRACE_URL": "javascript:alert({trace_id})"})
    settings = Settings.from_env({"TRACE_URL": "https://t.example/{trace_id}"})
    assert settings.trace_url == "https://t.example/{trace_id}"
