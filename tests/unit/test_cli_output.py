"""How `jobs show` prints a job's result and its progress for people: short JSON on a
line, long JSON cut saying how much there was; progress as a percentage, counters and
a message, each shown only when the handler gave it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobqueue.entrypoints.cli.output import json_text, progress_text
from jobqueue.wire.records import ProgressView

AT = datetime(2026, 12, 5, 14, 47, 3, 553257, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ({"imported": 300}, '{"imported": 300}'),
        ("done", '"done"'),
        (False, "false"),
        (0, "0"),
        ([], "[]"),
        ({"city": "Zürich"}, '{"city": "Zürich"}'),
    ],
)
def test_short_json_is_one_line(value: object, shown: str) -> None:
    assert json_text(value) == shown


def test_json_longer_than_a_line_is_indented_keeping_what_fits_on_a_line() -> None:
    value = {
        "customers": [{"id": n, "name": f"customer {n}", "total_cents": n * 1000} for n in (1, 2)],
        "ids": list(range(40)),
        "summary": {"note": "x" * 95},
    }

    assert json_text(value).splitlines() == [
        "{",
        '  "customers": [',
        '    {"id": 1, "name": "customer 1", "total_cents": 1000},',
        '    {"id": 2, "name": "customer 2", "total_cents": 2000}',
        "  ],",
        '  "ids": [',
        "    " + ", ".join(str(n) for n in range(26)) + ",",
        "    " + ", ".join(str(n) for n in range(26, 40)),
        "  ],",
        '  "summary": {',
        '    "note": "' + "x" * 95 + '"',
        "  }",
        "}",
    ]


def test_long_json_is_cut_saying_how_long_it_was() -> None:
    value = [{"line": "x" * 500}] * 50

    lines = json_text(value).splitlines()

    assert len(lines) == 21
    assert lines[:2] == ["[", "  {"]
    assert lines[2] == '    "line": "' + "x" * 186 + "…"
    assert len(lines[2]) == 200
    assert lines[-1] == "… (25,700 bytes of JSON in all: --json shows it whole)"


def test_json_with_a_line_too_long_is_cut_too() -> None:
    lines = json_text({"a": "x" * 300}).splitlines()

    assert lines == [
        "{",
        '  "a": "' + "x" * 191 + "…",
        "}",
        "… (309 bytes of JSON in all: --json shows it whole)",
    ]


@pytest.mark.parametrize(
    ("progress", "shown"),
    [
        (ProgressView(0.25, at=AT), "25%, at 2026-12-05 14:47:03"),
        (
            ProgressView(0.3, 300, 1000, "importing rows", AT),
            "30% (300 of 1,000): importing rows, at 2026-12-05 14:47:03",
        ),
        (
            ProgressView(done=12, message="pages read", at=AT),
            "(12 done): pages read, at 2026-12-05 14:47:03",
        ),
        (ProgressView(message="warming up", at=AT), "warming up, at 2026-12-05 14:47:03"),
        # Rounded down: never 100 % before the handler said so.
        (ProgressView(0.996, at=AT), "99%, at 2026-12-05 14:47:03"),
        (ProgressView(0.29, at=AT), "29%, at 2026-12-05 14:47:03"),
        (ProgressView(1.0, at=AT), "100%, at 2026-12-05 14:47:03"),
        (ProgressView(0.5), "50%"),
    ],
)
def test_progress_says_what_the_handler_gave(progress: ProgressView, shown: str) -> None:
    assert progress_text(progress) == shown


def test_an_earlier_attempts_report_says_so() -> None:
    report = ProgressView(0.8, message="first attempt", at=AT)

    assert progress_text(report, started_at=AT + timedelta(seconds=5)) == (
        "80%: first attempt, at 2026-12-05 14:47:03 (an earlier attempt's)"
    )
    assert progress_text(report, started_at=AT - timedelta(seconds=5)) == (
        "80%: first attempt, at 2026-12-05 14:47:03"
    )
