"""A process's description: each queue's share of its concurrency, when it says it."""

from __future__ import annotations

from uuid import uuid4

import pytest

from jobqueue.domain.processes import ProcessInfo


def _info(queues: tuple[str, ...], shares: tuple[int, ...]) -> ProcessInfo:
    return ProcessInfo(
        id=uuid4(),
        host="h",
        pid=1,
        version="1",
        queues=queues,
        types=("sleep",),
        concurrency=sum(shares) or 4,
        running=0,
        queue_concurrency=shares,
    )


def test_each_queue_is_paired_with_its_share() -> None:
    info = _info(("default", "emails"), (10, 2))
    assert info.concurrency_of() == (("default", 10), ("emails", 2))


def test_a_process_that_said_no_shares_has_none_per_queue() -> None:
    assert _info(("default",), ()).concurrency_of() == (("default", None),)


def test_shares_must_match_the_queues_one_for_one() -> None:
    with pytest.raises(ValueError, match="one number per queue"):
        _info(("default", "emails"), (10,))
