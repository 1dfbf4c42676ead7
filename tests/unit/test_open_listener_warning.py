"""A process whose API listens beyond this machine with no API_TOKENS says so, once, at
start; on loopback, or with tokens, it says nothing."""

from __future__ import annotations

import logging

import pytest

from jobqueue.entrypoints.config.variables import parse_http_addr
from jobqueue.entrypoints.service.runtime import is_loopback, warn_if_open


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:8080", True),
        ("127.0.0.2:8080", True),
        ("[::1]:8080", True),
        ("localhost:8080", True),
        (":8080", False),
        ("0.0.0.0:8080", False),
        ("[::]:8080", False),
        ("10.1.2.3:8080", False),
        ("api.internal:8080", False),
    ],
)
def test_only_loopback_addresses_keep_the_api_to_this_machine(address: str, loopback: bool) -> None:
    assert is_loopback(parse_http_addr(address)) is loopback


def test_an_open_api_without_tokens_is_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue")

    warn_if_open(parse_http_addr(":8080"), ())
    warn_if_open(parse_http_addr(":8080"), ("a-token",))
    warn_if_open(parse_http_addr("127.0.0.1:8080"), ())

    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("the API listens on :8080, reachable from other")
    assert "set API_TOKENS" in record.getMessage()
