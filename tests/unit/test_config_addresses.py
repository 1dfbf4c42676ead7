"""Settings that name places: DATABASE_URL, JOBQUEUE_DATA_DIR, the HTTP and metrics
listeners' addresses, and TRACE_URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobqueue.entrypoints.config.listeners import api_listener, metrics_listener
from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.config.variables import HttpAddress
from tests.support.settings_problems import problems_of


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

    assert address is not None
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


def test_a_trace_url_needs_its_trace_id_and_http() -> None:
    with pytest.raises(ConfigError, match=r"TRACE_URL: .* has no \{trace_id\}"):
        Settings.from_env({"TRACE_URL": "https://tempo.example/trace/"})
    with pytest.raises(ConfigError, match=r"TRACE_URL: .* is not an http"):
        Settings.from_env({"TRACE_URL": "javascript:alert({trace_id})"})
    settings = Settings.from_env({"TRACE_URL": "https://t.example/{trace_id}"})
    assert settings.trace_url == "https://t.example/{trace_id}"
