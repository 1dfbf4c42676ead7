"""Bulk actions by filter and the queue page without a browser: how a filter is read (and
refused), how a bounded count reads, the links a queue page offers, and user data shown
as text."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from jobqueue.domain.bulk import COUNT_BUDGET, MAX_SELECTED, SELECTABLE
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation
from jobqueue.entrypoints.http.ui.bulk import BulkAction, Tally, bulk_links, parse
from jobqueue.entrypoints.http.ui.pages import template_config
from tests.fakes import InMemoryJobStore
from tests.support.api import build_api

HOSTILE = "<script>alert(1)</script>"


def test_a_filter_becomes_the_action_and_its_selection() -> None:
    bulk = parse(
        {"operation": ["discard"], "status": ["failed"], "queue": ["mail"], "type": [""]},
        besides=("csrf",),
    )

    assert bulk.action is BulkAction.DISCARD
    # A discard selects as a retry does; a blank field is no filter.
    assert (bulk.selection.operation, bulk.selection.status) == (Operation.RETRY, Status.FAILED)
    assert (bulk.selection.queue, bulk.selection.type) == ("mail", None)
    assert bulk.selection.limit == MAX_SELECTED
    assert bulk.fields == {"operation": "discard", "status": "failed", "queue": "mail"}
    assert bulk.href == "/ui/bulk?operation=discard&status=failed&queue=mail"
    assert bulk.back_href == "/ui/queues/mail"


def test_a_filter_the_action_cannot_honour_is_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="remove finished_after, unique_key from the filter"):
        parse(
            {
                "operation": ["retry"],
                "status": ["failed"],
                "unique_key": ["k"],
                "finished_after": ["x"],
            }
        )
    with pytest.raises(ValueError, match="cannot cancel failed jobs"):
        parse({"operation": ["cancel"], "status": ["failed"]})


@pytest.mark.parametrize(
    ("counted", "over", "acted_on"),
    [(0, False, 0), (7, False, 7), (MAX_SELECTED, False, MAX_SELECTED)],
)
def test_a_count_within_the_limit_is_what_will_be_acted_on(
    counted: int, over: bool, acted_on: int
) -> None:
    tally = Tally(counted, MAX_SELECTED)
    assert (tally.over, tally.acted_on) == (over, acted_on)


def test_a_count_past_the_limit_says_only_that_there_are_more() -> None:
    tally = Tally(MAX_SELECTED + 1, MAX_SELECTED)
    assert (tally.over, tally.acted_on) == (True, MAX_SELECTED)


def test_a_queue_offers_every_action_on_every_status_it_may_select() -> None:
    links = bulk_links(queue="mail")

    assert list(links) == list(BulkAction)
    for action, each in links.items():
        operation = Operation.CANCEL if action is BulkAction.CANCEL else Operation.RETRY
        assert len(each) == len(SELECTABLE[operation])
        assert all(f"operation={action}&" in link.href for link in each)
        assert all(link.href.endswith("&queue=mail") for link in each)
    assert links[BulkAction.RETRY][1].label == "Retry dead-letter jobs"
    assert links[BulkAction.CANCEL][0].label == "Cancel pending jobs"


def test_a_bulk_page_shows_a_hostile_type_as_text() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        answer = client.get(
            "/ui/bulk", params={"operation": "retry", "status": "failed", "type": HOSTILE}
        )

    assert answer.status_code == 200
    assert HOSTILE not in answer.text
    assert "of type <code>&lt;script&gt;alert(1)&lt;/script&gt;</code>" in answer.text


def test_the_confirmation_carries_a_hostile_type_back_escaped() -> None:
    bulk = parse({"operation": ["retry"], "status": ["failed"], "type": [HOSTILE]})
    template = template_config("1.0").engine_instance.get_template("bulk.html")

    html = template.render(bulk=bulk, tally=Tally(3, MAX_SELECTED), csrf="token", signed_in=False)

    assert HOSTILE not in html
    assert 'name="type" value="&lt;script&gt;alert(1)&lt;/script&gt;"' in html
    assert "Retry 3 jobs</button>" in html


@pytest.mark.parametrize("matched", [0, 7])
def test_a_count_that_could_not_read_every_job_says_so_and_still_offers_the_action(
    matched: int,
) -> None:
    bulk = parse({"operation": ["retry"], "status": ["dead_letter"], "queue": ["rare"]})
    template = template_config("1.0").engine_instance.get_template("bulk.html")

    tally = Tally(matched, MAX_SELECTED, complete=False)
    html = template.render(bulk=bulk, tally=tally, csrf="token", signed_in=False)

    assert "nothing to retry" not in html
    assert f"match among the first {COUNT_BUDGET:,} dead-letter jobs read" in html
    assert "more may match beyond them" in html
    assert f"Retry up to {MAX_SELECTED} jobs</button>" in html
