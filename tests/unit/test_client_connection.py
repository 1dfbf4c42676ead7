"""What a client is made with, and what it says when the service cannot be reached: real
sockets on the loopback interface, no service behind them."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta

import pytest

from jobqueue.client import (
    AsyncClient,
    Client,
    ClientError,
    InvalidClientOption,
    Retries,
    ServiceUnreachable,
)

ONCE = Retries(attempts=1)
FAST = Retries(attempts=3, base=timedelta(milliseconds=1), cap=timedelta(milliseconds=2))


@pytest.mark.parametrize(
    ("token", "named"),
    [("…", "character 1 is '…' (U+2026)"), ("s3cret\n", "character 7 is '\\n' (U+000A)")],
)
def test_a_token_no_header_can_carry_is_refused_when_the_client_is_made(
    token: str, named: str
) -> None:
    for made in (Client, AsyncClient):
        with pytest.raises(InvalidClientOption) as raised:
            made("http://127.0.0.1:8080", token=token)
        message = str(raised.value)
        assert message.startswith(f"token: {named}, which an Authorization header cannot carry")
        # A ValueError for the caller who passed it, a ClientError for one catching the
        # client's errors.
        assert isinstance(raised.value, ValueError)
        assert isinstance(raised.value, ClientError)


def test_a_token_is_named_by_one_character_never_whole() -> None:
    with pytest.raises(InvalidClientOption) as raised:
        Client("http://127.0.0.1:8080", token="s3cret token")
    assert "s3cret" not in str(raised.value)
    assert "character 7 is ' ' (U+0020)" in str(raised.value)


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "localhost:8080", "ftp://host/", "http://"])
def test_a_url_that_is_not_http_is_refused_when_the_client_is_made(url: str) -> None:
    with pytest.raises(InvalidClientOption) as raised:
        Client(url)
    assert str(raised.value).startswith(f"base_url {url!r}")


def test_an_unreachable_service_is_named_by_its_url_and_the_reason() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    # Nothing listens on `port` now: every connection is refused.
    with (
        Client(f"http://127.0.0.1:{port}/", retries=FAST) as client,
        pytest.raises(ServiceUnreachable) as raised,
    ):
        client.queues()
    assert (
        str(raised.value) == f"cannot reach http://127.0.0.1:{port} (connection refused, 3 tries)"
    )


@pytest.fixture
def silent() -> Iterator[str]:
    """A URL whose connections are made (the kernel accepts them into the backlog) but
    never answered."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(16)
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"


def test_a_service_that_does_not_answer_is_named_with_the_time_allowed(silent: str) -> None:
    with (
        Client(silent, timeout=0.2, retries=ONCE) as client,
        pytest.raises(ServiceUnreachable) as raised,
    ):
        client.queues()
    assert str(raised.value) == f"cannot reach {silent} (no answer within 0.2s)"


def test_an_unanswered_bulk_action_may_have_been_carried_out(silent: str) -> None:
    # Not tried again (a second call would act on more jobs), and the message says why
    # the operator should look before acting again.
    with (
        Client(silent, timeout=0.2, retries=FAST) as client,
        pytest.raises(ServiceUnreachable) as raised,
    ):
        client.retry_many("dead_letter")
    assert str(raised.value) == (
        f"cannot reach {silent} (no answer within 0.2s); POST /jobs/retry may have been carried out"
    )


async def test_the_async_client_names_the_url_too(silent: str) -> None:
    async with AsyncClient(silent, timeout=0.2, retries=ONCE) as client:
        with pytest.raises(ServiceUnreachable) as raised:
            await client.types()
    assert str(raised.value) == f"cannot reach {silent} (no answer within 0.2s)"
