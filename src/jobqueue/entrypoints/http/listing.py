"""`GET /jobs`'s query string into a `JobQuery`, and page positions into opaque cursors.

Every refusal is a 400 saying what to change. A cursor is base64url (unpadded) of a small
JSON object: the status it was listed under, and the last job's sort key and id. Clients
must treat it as opaque; it is checked, not trusted, when it comes back.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from uuid import UUID

from litestar.exceptions import ClientException

from jobqueue.domain.fields import MAX_TYPE_LENGTH, check_queue_name
from jobqueue.domain.listing import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    MIN_LIST_LIMIT,
    NOT_BY_QUEUE,
    GroupValue,
    JobQuery,
    ListPosition,
)
from jobqueue.domain.status import TRAITS, Status

LIST_PARAMETERS = ("status", "type", "queue", "limit", "cursor")
_STATUSES = ", ".join(status.value for status in Status)
# Far above any cursor this service makes; a bigger one is not worth decoding.
_MAX_CURSOR_LENGTH = 512
_MALFORMED = "cursor is malformed: pass a previous page's next_cursor back unchanged"


def parse_list_query(parameters: Mapping[str, Sequence[str]]) -> JobQuery:
    """`parameters` (every value of every query parameter) as a `JobQuery`, or a 400."""
    unknown = sorted(set(parameters) - set(LIST_PARAMETERS))
    if unknown:
        raise ClientException(
            detail=f"unknown query parameter {unknown[0]!r} (allowed: {', '.join(LIST_PARAMETERS)})"
        )
    single = {name: _single(name, values) for name, values in parameters.items()}
    status = _status(single.get("status"))
    job_type = _type(single.get("type"))
    queue = _queue(single.get("queue"))
    if queue is not None and not TRAITS[status].by_queue:
        raise ClientException(detail=NOT_BY_QUEUE.format(status=status.value))
    return JobQuery(
        status=status,
        type=job_type,
        queue=queue,
        limit=_limit(single.get("limit")),
        after=None if single.get("cursor") is None else decode_cursor(single["cursor"], status),
    )


def encode_cursor(status: Status, position: ListPosition) -> str:
    document: dict[str, object] = {
        "s": status.value,
        "k": position.key.isoformat(),
        "id": str(position.job_id),
    }
    if position.groups:
        document["g"] = list(position.groups)
    raw = json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str, status: Status) -> ListPosition:
    """The position `cursor` holds, refused unless it was made by a listing of `status`."""
    if len(cursor) > _MAX_CURSOR_LENGTH:
        raise ClientException(detail=_MALFORMED)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        document = json.loads(raw)
        listed, key, job_id = document["s"], document["k"], document["id"]
        if not all(isinstance(value, str) for value in (listed, key, job_id)):
            raise ValueError("cursor fields must be strings")
        moment, job = datetime.fromisoformat(key), UUID(job_id)
        groups = document.get("g", [])
    except (binascii.Error, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        # json.JSONDecodeError is a ValueError; a non-object document fails the lookups.
        raise ClientException(detail=_MALFORMED) from None
    if moment.tzinfo is None:
        raise ClientException(detail=_MALFORMED)
    if listed != status.value:
        raise ClientException(
            detail=f"cursor belongs to a listing of status {listed!r}, not {status.value!r}: "
            "start again without a cursor"
        )
    try:
        return ListPosition(moment, job, _groups(groups, status))
    except ValueError:
        raise ClientException(detail=_MALFORMED) from None


def _groups(raw: object, status: Status) -> tuple[GroupValue, ...]:
    """The group values a cursor carries: as many as the status's order has, each of the
    type its column holds (a queue name, a priority, a job type)."""
    names = TRAITS[status].order.groups
    if not isinstance(raw, list) or len(raw) != len(names):
        raise ValueError("cursor groups do not fit the listing")
    kinds = {"queue": str, "priority": int, "type": str}
    for name, value in zip(names, raw, strict=True):
        if type(value) is not kinds[name]:
            raise ValueError(f"cursor group {name} has the wrong type")
    return tuple(raw)


def _single(name: str, values: Sequence[str]) -> str:
    if len(values) != 1:
        raise ClientException(detail=f"query parameter {name!r} must be given once")
    return values[0]


def _status(raw: str | None) -> Status:
    # Required: every listing reads one status's index. Unfiltered, a listing would scan
    # the whole history of finished jobs.
    if raw is None:
        raise ClientException(detail=f"query parameter 'status' is required: one of {_STATUSES}")
    try:
        return Status(raw)
    except ValueError:
        raise ClientException(
            detail=f"unknown status {_shown(raw)!r}: expected one of {_STATUSES}"
        ) from None


def _type(raw: str | None) -> str | None:
    if raw is None:
        return None
    if not raw or len(raw) > MAX_TYPE_LENGTH or "\x00" in raw:
        raise ClientException(detail=f"type must be 1 to {MAX_TYPE_LENGTH} characters, without NUL")
    return raw


def _queue(raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        return check_queue_name(raw)
    except ValueError as error:
        raise ClientException(detail=str(error)) from None


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIST_LIMIT
    # int() would also take " 5", "+5" and "5_0"; only plain digits are a limit here.
    limit = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 6 else None
    if limit is None or not MIN_LIST_LIMIT <= limit <= MAX_LIST_LIMIT:
        raise ClientException(
            detail=f"limit must be an integer from {MIN_LIST_LIMIT} to {MAX_LIST_LIMIT}, "
            f"got {_shown(raw)!r}"
        )
    return limit


def _shown(raw: str) -> str:
    # Echoed back to whoever sent it; a long value helps nobody read the error.
    return raw if len(raw) <= 64 else raw[:64] + "…"
