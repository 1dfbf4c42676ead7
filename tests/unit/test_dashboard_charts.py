"""The overview's charts as drawn on the server: the scales put values where they
belong, an empty window draws a frame that says so, a slot without pickups is a gap, and
whatever a chart says is escaped; a queue filter that names no queue is refused."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from litestar.testing import TestClient

from jobqueue.domain.throughput import BUCKETS, LAST_DAY, LAST_HOUR, Slot, bucket_of
from jobqueue.entrypoints.http.ui.charts import (
    BOTTOM,
    LEFT,
    RIGHT,
    TOP,
    latency_chart,
    nice_ceiling,
    throughput_chart,
    x_of,
)
from jobqueue.entrypoints.http.ui.pages import template_config
from tests.fakes import InMemoryJobStore
from tests.support.api import build_api

HOSTILE = "<script>alert(1)</script>\"'&"
START = datetime(2026, 12, 4, 11, 0, tzinfo=UTC)


def _hour(**at: Slot) -> list[Slot]:
    """An hour of empty minutes, with the given slots (by index) in place."""
    return [at.get(f"m{index}", Slot(START + timedelta(minutes=index))) for index in range(60)]


def _points(path: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"[ML]([\d.]+) ([\d.]+)", path)]


@pytest.mark.parametrize(
    ("most", "top"), [(0, 2), (1, 2), (2, 2), (3, 5), (7, 10), (11, 20), (4000, 5000)]
)
def test_a_count_axis_tops_out_at_a_round_number(most: float, top: float) -> None:
    assert nice_ceiling(most) == top


def test_throughput_lines_span_the_width_and_scale_to_the_busiest_slot() -> None:
    last = START + timedelta(minutes=59)
    slots = _hour(m0=Slot(START, completed=10), m59=Slot(last, completed=4, failed=2))

    chart = throughput_chart(slots, LAST_HOUR, None)

    completed, failed, retried = (_points(line.path) for line in chart.lines)
    assert len(completed) == 60
    assert completed[0] == (LEFT, TOP), "the busiest slot touches the axis' top (10)"
    end_x, end_y = completed[-1]
    assert end_x == RIGHT
    assert end_y == pytest.approx(BOTTOM - (BOTTOM - TOP) * 0.4, abs=0.1)
    assert {y for _, y in retried} == {BOTTOM}
    assert failed[-1][1] == pytest.approx(BOTTOM - (BOTTOM - TOP) * 0.2, abs=0.1)
    assert [tick.label for tick in chart.y_ticks] == ["0", "5", "10"]
    assert [tick.label for tick in chart.x_ticks] == ["11:00", "11:15", "11:30", "11:45"]
    assert chart.empty is None
    assert chart.summary.startswith("14 completed, 2 failed and 0 retried in the last hour")


def test_an_empty_window_draws_its_frame_and_says_so() -> None:
    slots = [Slot(START + LAST_DAY.step * index) for index in range(LAST_DAY.points)]

    throughput = throughput_chart(slots, LAST_DAY, None)
    latency = latency_chart(slots, LAST_DAY, None)

    assert throughput.empty == "No attempt ended in the last day."
    assert throughput.unit == "attempts per 15 minutes"
    assert [tick.label for tick in throughput.x_ticks] == ["12:00", "18:00", "00:00", "06:00"]
    assert latency.empty == "No job was picked up in the last day."
    assert all(line.path == "" for line in latency.lines)
    assert latency.y_ticks, "the latency axis keeps its ticks"


def test_latency_is_on_a_log_axis_with_gaps_where_nothing_was_picked_up() -> None:
    fast, slow = [0] * BUCKETS, [0] * BUCKETS
    fast[bucket_of(0.005)] = 10
    slow[bucket_of(20)] = 10
    slots = _hour(
        m0=Slot(START, picked=10, pickup_seconds=0.05, pickup_buckets=tuple(fast)),
        m1=Slot(
            START + timedelta(minutes=1), picked=10, pickup_seconds=0.05, pickup_buckets=tuple(fast)
        ),
        m30=Slot(
            START + timedelta(minutes=30), picked=10, pickup_seconds=200, pickup_buckets=tuple(slow)
        ),
    )

    chart = latency_chart(slots, LAST_HOUR, "mail")

    p50 = chart.lines[0].path
    assert p50.count("M") == 2, "the line breaks over the minutes without pickups"
    assert p50.count("L") == 1
    # The minute alone between empty ones is a dot: a path of one point draws nothing.
    [(x, _)] = chart.lines[0].dots
    assert x == round(x_of(30, 60), 1)
    labels = [tick.label for tick in chart.y_ticks]
    assert labels[0] == "1 ms"
    assert labels[-1] == "1 min"
    assert "queue mail" in chart.title
    assert chart.summary.startswith("30 jobs picked up in the last hour, queue mail, after")


def test_everything_a_chart_says_is_escaped() -> None:
    engine = template_config("1.0").engine_instance
    charts = [
        throughput_chart(_hour(), LAST_HOUR, HOSTILE),
        latency_chart(_hour(), LAST_HOUR, HOSTILE),
    ]

    html = engine.get_template("fragments/charts.html").render(
        charts=charts, charts_href="/ui/fragments/charts", charts_refresh_seconds=15
    )

    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;" in html
    assert html.count("<svg") == 2
    assert html.count("<title") == 2


@pytest.mark.parametrize(
    "path", ["/ui?queue=no%20such%3Cqueue%3E", "/ui/fragments/charts?queue=%20"]
)
def test_a_chart_filter_that_is_no_queue_name_is_a_400_page(path: str) -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        answer = client.get(path)

    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")
    assert "queue name must be" in answer.text
    assert "<queue>" not in answer.text


def test_without_a_rollup_the_overview_shows_no_charts() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        answer = client.get("/ui")
        fragment = client.get("/ui/fragments/charts")

    assert answer.status_code == 200
    assert "<svg" not in answer.text
    assert 'id="charts"' not in answer.text
    assert fragment.status_code == 404
    assert fragment.headers["content-type"].startswith("text/html")
