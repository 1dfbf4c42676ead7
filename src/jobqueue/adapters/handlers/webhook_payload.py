"""What a `webhook` job carries, and the check of its URL at submission.

Apart from `webhook.py` so that a process can register the handler, and a submission be
validated, without importing the HTTP client: httpx is loaded by the first URL checked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from jobqueue.domain.registry import JobContext

if TYPE_CHECKING:
    import httpx


class WebhookPayload(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    url: str
    body: Any = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        # A ValueError here is a validation error to msgspec: refused at submission.
        destination(self.url)


class PublicWebhookPayload(WebhookPayload, forbid_unknown_fields=True, frozen=True):
    """A webhook payload whose URL must not name a private address literally (refused at
    submission, 400). A name is resolved only by the worker, which checks every address
    it connects to: this check is the early answer for what can be judged without DNS."""

    def __post_init__(self) -> None:
        url = destination(self.url)
        # Imported with the check: the SSRF module loads httpx, as `destination` does.
        from jobqueue.adapters.handlers.ssrf import literal_refusal

        refusal = literal_refusal(url.host)
        if refusal is not None:
            raise ValueError(refusal)


WebhookHandler = Callable[[JobContext, WebhookPayload], Awaitable[None]]


def destination(text: str) -> httpx.URL:
    """`text` as an absolute http(s) URL; raise `ValueError` saying what is wrong."""
    import httpx

    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as error:
        raise ValueError(f"url is not a valid URL: {error}") from error
    if url.scheme not in ("http", "https"):
        found = f", not {url.scheme}://" if url.scheme else ""
        raise ValueError(f"url must start with http:// or https://{found}")
    if not url.host:
        raise ValueError("url has no host")
    return url
