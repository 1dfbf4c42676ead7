"""Outbound HTTP that cannot be steered at private addresses (SSRF protection).

A check on the hostname alone is not enough: the name can resolve to a public address
when checked and to 127.0.0.1 when connected (DNS rebinding). `PinnedTransport` resolves
the name once, checks every address, and connects to an address it checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

import httpx

from jobqueue.domain.errors import Permanent

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolve = Callable[[str, int], Awaitable[list[str]]]
"""`(host, port) -> addresses`, in the order they should be tried."""

ALLOW_PRIVATE_HINT = "set WEBHOOK_ALLOW_PRIVATE=true to allow private destinations"

_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 6052 well-known prefix: a NAT64 gateway forwards these to the IPv4 address inside.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class DestinationRefused(Permanent):
    """The destination is not a public address and private destinations are not allowed."""


async def resolve_host(host: str, port: int) -> list[str]:
    """The system resolver's addresses for `host`, without duplicates."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def non_public(address: IPAddress) -> str | None:
    """Why `address` is not a public unicast address ("a loopback address"), or None."""
    if isinstance(address, ipaddress.IPv6Address):
        # An IPv6 address can carry an IPv4 one that the network stack or a gateway
        # will actually connect to. Mapped and NAT64 addresses are judged by that IPv4
        # address alone: on an IPv6-only network with DNS64 every IPv4-only destination
        # resolves to 64:ff9b::/96, a prefix ipaddress files under "reserved".
        if address.ipv4_mapped is not None:
            return non_public(address.ipv4_mapped)
        nat64 = _nat64_embedded(address)
        if nat64 is not None:
            return _embedding(nat64)
        if address.sixtofour is not None and (verdict := _embedding(address.sixtofour)):
            return verdict
    kind = _kind(address)
    if kind is None:
        return None
    article = "an" if kind[0] in "aeiou" else "a"
    return f"{article} {kind} address"


def _embedding(address: ipaddress.IPv4Address) -> str | None:
    verdict = non_public(address)
    return None if verdict is None else f"an IPv6 address embedding {address}, {verdict}"


def _kind(address: IPAddress) -> str | None:
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "site-local"
    if address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "non-public"
    return None


def _nat64_embedded(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address not in _NAT64:
        return None
    return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)


def literal_refusal(host: str) -> str | None:
    """Why a URL whose host is `host` is refused before any lookup: it is an address, and
    not a public one. None for a public address or a name."""
    address = _literal(host)
    verdict = None if address is None else non_public(address)
    if verdict is None:
        return None
    return f"url's host {host} is {verdict}; {ALLOW_PRIVATE_HINT}"


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def redacted(url: httpx.URL) -> str:
    """`url` fit for an error message stored with the job: no credentials, no query."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


class PinnedTransport(httpx.AsyncBaseTransport):
    """Resolves each request's host once, refuses non-public addresses (unless
    `allow_private`), and sends the request to the checked address.

    The request is rewritten to the IP (`http://93.184.216.34/hook`) while keeping the
    original `Host` header, and for https the original hostname goes to httpcore as
    `sni_hostname`, which it uses both for SNI and for certificate verification: TLS
    still proves the peer is the named host, and no second DNS lookup happens that a
    rebinding name could answer differently.

    Connections are pooled by IP, so one transport must not serve several hostnames
    over https (a pooled TLS session was verified for one name only): give each
    delivery its own transport, as the webhook handler does.
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolve: Resolve = resolve_host,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._allow_private = allow_private
        self._resolve = resolve
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport(retries=0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.raw_host.decode("ascii")
        addresses = await self._checked_addresses(request, host)
        # Several addresses (IPv6 and IPv4, say): a refused connection moves to the next,
        # and the last one's error is the one reported.
        for address in addresses[:-1]:
            try:
                return await self._inner.handle_async_request(_pinned(request, address, host))
            except httpx.ConnectError:
                continue
        return await self._inner.handle_async_request(_pinned(request, addresses[-1], host))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def _checked_addresses(self, request: httpx.Request, host: str) -> list[str]:
        literal = _literal(host)
        if literal is not None:
            self._check(request, literal, f"{literal} is")
            return [str(literal)]
        addresses = await self._lookup(request, host)
        for text in addresses:
            self._check(request, ipaddress.ip_address(text), f"{host} resolves to {text},")
        return addresses

    async def _lookup(self, request: httpx.Request, host: str) -> list[str]:
        port = request.url.port or _DEFAULT_PORTS.get(request.url.scheme, 80)
        timeout = request.extensions.get("timeout", {}).get("connect")
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._resolve(host, port)
        except TimeoutError as error:
            raise httpx.ConnectTimeout(f"resolving {host} timed out", request=request) from error
        except OSError as error:
            # Name resolution failures are often temporary (resolver down, record not
            # yet propagated), so they surface as connection errors, which are retried.
            raise httpx.ConnectError(f"cannot resolve {host}: {error}", request=request) from error
        if not addresses:
            raise httpx.ConnectError(f"{host} resolves to no address", request=request)
        return addresses

    def _check(self, request: httpx.Request, address: IPAddress, subject: str) -> None:
        if self._allow_private:
            return
        verdict = non_public(address)
        if verdict is not None:
            raise DestinationRefused(
                f"refusing to call {redacted(request.url)}: {subject} {verdict}; "
                + ALLOW_PRIVATE_HINT
            )


def _pinned(request: httpx.Request, address: str, host: str) -> httpx.Request:
    extensions = dict(request.extensions)
    if request.url.scheme == "https":
        extensions["sni_hostname"] = host
    # The headers already hold `Host: <original host>`, set when the request was built.
    return httpx.Request(
        request.method,
        request.url.copy_with(host=address),
        headers=request.headers,
        stream=request.stream,
        extensions=extensions,
    )
