"""What a handler returned, as the JSON text its job keeps (`Job.result`).

Encoded by msgspec, so a handler may return what it naturally has: dicts and lists of
JSON values, but also dataclasses, msgspec Structs, datetimes, UUIDs, enums and sets.
Checked here, in the worker, before the ending is written: a value the ending's
statement would make PostgreSQL refuse (a NUL character, which `jsonb` cannot hold)
would fail every other ending of its batch with it.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from jobqueue.domain.errors import Permanent

# The RESULT_MAX_BYTES setting's default: a result is for passing on what a job found
# (an id, a summary, a few rows), not for storing files in the queue's table.
DEFAULT_RESULT_MAX_BYTES = 1 << 20

# `\u0000` not itself escaped (an odd number of backslashes before the `u`).
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_encode = msgspec.json.Encoder().encode


class UnstorableResult(Permanent):
    """A handler returned what its job cannot keep: trying again would return the same."""


def encode_result(value: Any, max_bytes: int) -> str | None:
    """`value` as JSON text, or None for None; raise `UnstorableResult` saying why it
    cannot be kept."""
    if value is None:
        return None
    try:
        encoded = _encode(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise UnstorableResult(f"the handler returned a value that is not JSON: {error}") from None
    if len(encoded) > max_bytes:
        raise UnstorableResult(
            f"the handler's result is {len(encoded):,} bytes of JSON, over RESULT_MAX_BYTES "
            f"({max_bytes:,}): keep large results elsewhere and return where they are"
        )
    text = encoded.decode()
    if _NUL_ESCAPE.search(text):
        raise UnstorableResult("the handler's result holds a NUL character, which jsonb cannot")
    return text
