"""What both clients' httpx connection pool is made with: the service's URL, the headers
every request carries, the token among them, each checked when the client is made."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from jobqueue.client.errors import InvalidClientOption
from jobqueue.wire.tokens import first_unsendable


def http_options(
    base_url: str, token: str | None, timeout: float, headers: Mapping[str, str] | None
) -> dict[str, Any]:
    """The httpx client's options; raises `InvalidClientOption` for what it could never
    send, now rather than as an encoding error at the first call."""
    sent = {"Accept": "application/json", **(headers or {})}
    # An empty token (JOBQUEUE_TOKEN= in a shell) is no token, not an empty Bearer that
    # httpx refuses to send.
    if token:
        _check_token(token)
        sent["Authorization"] = f"Bearer {token}"
    return {"base_url": _checked_url(base_url), "timeout": timeout, "headers": sent}


def _check_token(token: str) -> None:
    index = first_unsendable(token)
    if index is None:
        return
    # One character is named (not the token: it is a secret), enough to recognise a
    # placeholder pasted from an example, or a line break read from a file.
    character = token[index]
    raise InvalidClientOption(
        f"token: character {index + 1} is {character!r} (U+{ord(character):04X}), which an "
        "Authorization header cannot carry; a token is visible ASCII, as the service's "
        "API_TOKENS holds it (is a placeholder such as '…' left in?)"
    )


def _checked_url(base_url: str) -> str:
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as error:
        raise InvalidClientOption(f"base_url {base_url!r}: {error}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidClientOption(
            f"base_url {base_url!r} is not an http:// or https:// URL with a host, "
            "such as http://127.0.0.1:8080"
        )
    return base_url.rstrip("/")
