"""The webhook handler's guard against SSRF: destinations refused before any connection,
and the connection made to the address it checked. Only 127.0.0.1 is ever contacted:
cases that would reach elsewhere if the guard failed use a transport that sends nothing."""

from __future__ import annotations

from ipaddress import ip_address

import httpx
import pytest

from jobqueue.adapters.handlers.ssrf import DestinationRefused, PinnedTransport, non_public
from jobqueue.adapters.handlers.webhook import WebhookRetryable
from jobqueue.domain.errors import is_permanent
from tests.support.webhook_calls import FakeResolver, NoTraffic, deliver, handler
from tests.support.webhook_endpoints import (
    Receiver,
    receiver,
    service_certificate,
    tls_receiver,
    trusting_network,
)

# Fixtures of tests.support.webhook_endpoints, used by name.
__all__ = ["receiver", "service_certificate", "tls_receiver", "trusting_network"]


ALLOW_HINT = "set WEBHOOK_ALLOW_PRIVATE=true to allow private destinations"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8080/", "127.0.0.1 is a loopback address"),
        ("http://[::1]/", "::1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://10.0.0.1/", "10.0.0.1 is a private address"),
        # Python 3.13 renders mapped addresses differently, hence the computed text.
        ("https://[::ffff:10.0.0.1]/", f"{ip_address('::ffff:10.0.0.1')} is a private address"),
        ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
        ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
    ],
)
async def test_refuses_non_public_ip_literals_before_any_lookup_or_connection(
    url: str, why: str
) -> None:
    resolve = FakeResolver()
    network = NoTraffic()

    with pytest.raises(DestinationRefused) as raised:
        await deliver(handler(allow_private=False, resolve=resolve, network=network), url)

    assert str(raised.value) == f"refusing to call {url}: {why}; {ALLOW_HINT}"
    assert is_permanent(raised.value)
    assert network.attempts == []
    assert resolve.lookups == []


async def test_refuses_the_loopback_receiver_it_could_reach(receiver: Receiver) -> None:
    with pytest.raises(DestinationRefused):
        await deliver(handler(allow_private=False), receiver.url("/hook"))

    assert receiver.received() == []


async def test_refuses_localhost_after_resolving_it(receiver: Receiver) -> None:
    url = receiver.url("/hook", host="localhost")

    with pytest.raises(DestinationRefused) as raised:
        await deliver(handler(allow_private=False), url)

    message = str(raised.value)
    assert message.startswith(f"refusing to call {url}: localhost resolves to ")
    assert message.endswith(f", a loopback address; {ALLOW_HINT}")
    assert receiver.received() == []


async def test_refuses_a_name_that_resolves_to_loopback(receiver: Receiver) -> None:
    resolve = FakeResolver({"rebind.test": ["127.0.0.1"]})
    url = receiver.url("/hook", host="rebind.test")

    with pytest.raises(DestinationRefused) as raised:
        await deliver(handler(allow_private=False, resolve=resolve), url)

    assert "rebind.test resolves to 127.0.0.1, a loopback address" in str(raised.value)
    assert resolve.lookups == [("rebind.test", receiver.port)]
    assert receiver.received() == []


async def test_refuses_a_name_when_any_of_its_addresses_is_private() -> None:
    resolve = FakeResolver({"mixed.test": ["93.184.216.34", "10.1.2.3"]})
    network = NoTraffic()

    with pytest.raises(DestinationRefused) as raised:
        await deliver(
            handler(allow_private=False, resolve=resolve, network=network), "https://mixed.test/"
        )

    assert "mixed.test resolves to 10.1.2.3, a private address" in str(raised.value)
    assert network.attempts == []


async def test_connects_to_the_address_it_checked_with_the_original_host_header(
    receiver: Receiver,
) -> None:
    resolve = FakeResolver({"service.test": ["127.0.0.1"]})

    await deliver(
        handler(allow_private=True, resolve=resolve), receiver.url("/hook", host="service.test")
    )

    [request] = receiver.received()
    assert request.headers["Host"] == f"service.test:{receiver.port}"
    assert resolve.lookups == [("service.test", receiver.port)]


async def test_https_goes_to_the_checked_ip_verifying_tls_for_the_hostname() -> None:
    sent: list[httpx.Request] = []

    def network(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(204)

    resolve = FakeResolver({"hooks.example.com": ["93.184.216.34"]})
    handle = handler(allow_private=False, resolve=resolve, network=httpx.MockTransport(network))

    await deliver(handle, "https://hooks.example.com/hook")

    [request] = sent
    assert request.url == httpx.URL("https://93.184.216.34/hook")
    assert request.headers["Host"] == "hooks.example.com"
    # httpcore uses sni_hostname for both SNI and certificate hostname verification.
    assert request.extensions["sni_hostname"] == "hooks.example.com"


async def test_https_to_the_pinned_ip_verifies_the_certificate_for_the_hostname(
    tls_receiver: Receiver, trusting_network: httpx.AsyncBaseTransport
) -> None:
    resolve = FakeResolver({"service.test": ["127.0.0.1"]})
    handle = handler(allow_private=True, resolve=resolve, network=trusting_network)

    await deliver(handle, tls_receiver.url("/hook", host="service.test"))

    [request] = tls_receiver.received()
    assert request.headers["Host"] == f"service.test:{tls_receiver.port}"


async def test_https_refuses_a_certificate_that_does_not_name_the_host(
    tls_receiver: Receiver, trusting_network: httpx.AsyncBaseTransport
) -> None:
    # Same IP, same trusted certificate; only the name differs, so only a check against
    # the name (not the IP, not "any trusted certificate") can refuse it.
    resolve = FakeResolver({"other.test": ["127.0.0.1"]})
    handle = handler(allow_private=True, resolve=resolve, network=trusting_network)

    with pytest.raises(WebhookRetryable) as raised:
        await deliver(handle, tls_receiver.url("/hook", host="other.test"))

    assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value)
    assert tls_receiver.received() == []


async def test_tries_the_next_checked_address_when_one_refuses_the_connection() -> None:
    tried: list[str] = []

    def network(request: httpx.Request) -> httpx.Response:
        tried.append(request.url.host)
        if request.url.host == "2606:2800:220:1::1":
            raise httpx.ConnectError("Network is unreachable", request=request)
        return httpx.Response(200)

    transport = PinnedTransport(
        allow_private=False,
        resolve=FakeResolver({"dual.test": ["2606:2800:220:1::1", "93.184.216.34"]}),
        inner=httpx.MockTransport(network),
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.post("http://dual.test/")

    assert response.status_code == 200
    assert tried == ["2606:2800:220:1::1", "93.184.216.34"]


@pytest.mark.parametrize(
    ("address", "verdict"),
    [
        ("93.184.216.34", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("fe80::1", "a link-local address"),
        ("fc00::1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("100.64.0.1", "a non-public address"),
        ("240.0.0.1", "a reserved address"),
        ("ff0e::1", "a multicast address"),
        ("fec0::1", "a site-local address"),
        ("2002:7f00:1::", "an IPv6 address embedding 127.0.0.1, a loopback address"),
        ("64:ff9b::a9fe:a9fe", "an IPv6 address embedding 169.254.169.254, a link-local address"),
    ],
)
def test_classifies_addresses_by_where_they_lead(address: str, verdict: str | None) -> None:
    assert non_public(ip_address(address)) == verdict
