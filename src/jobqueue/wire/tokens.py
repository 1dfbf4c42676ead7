"""What a bearer token may hold: visible ASCII, the characters an `Authorization` header
carries as they are. The service's API_TOKENS and the client's `token` follow this one
rule, so a token one accepts the other can send."""

from __future__ import annotations


def first_unsendable(token: str) -> int | None:
    """The index of `token`'s first character a header cannot carry, or None."""
    for index, character in enumerate(token):
        if not "!" <= character <= "~":
            return index
    return None
