"""A rate per job type across real processes (issue 28): in a queue shared by two types,
the rated one starts at most its rate in every one-second window of its jobs' start
times, at 90 % of it at least, while the other type, submitted behind its backlog, is
not held back by it."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from tests.support.flow_fleet import _assert_paced, _drained, _fleet, _worker
from tests.support.postgres import dsn

pytestmark = [pytest.mark.slow]

TYPE_RATE = 10
RATED_JOBS = 50
OTHER_JOBS = 200


async def _starts(connection: asyncpg.Connection, job_type: str) -> list[float]:
    return sorted(
        row[0].timestamp()
        for row in await connection.fetch(
            "SELECT started_at FROM jobs WHERE type = $1 AND attempts = 1", job_type
        )
    )


@pytest.mark.timeout(120)
async def test_a_type_s_rate_holds_in_every_second_and_the_other_types_run_beside_it(
    database_url: str, tmp_path: Path
) -> None:
    connection = await asyncpg.connect(dsn(database_url))
    try:
        # The rated type's backlog first, due before the other type's jobs.
        for job_type, count in (("paced_sms", RATED_JOBS), ("paced_mail", OTHER_JOBS)):
            await connection.execute(
                "INSERT INTO jobs (type, queue, max_attempts)"
                " SELECT $1, 'paced_types', 25 FROM generate_series(1, $2::int)",
                job_type,
                count,
            )
        with _fleet() as services:
            settings = {
                "QUEUES": "paced_types",
                "QUEUE_LIMITS": f"paced_types type_rate=paced_sms:{TYPE_RATE}/s",
            }
            for slot in range(2):
                services.append(_worker(database_url, tmp_path / f"w{slot}", **settings))
            await _drained(connection, "paced_types", pacing=RATED_JOBS / TYPE_RATE)
        rated = await _starts(connection, "paced_sms")
        other = await _starts(connection, "paced_mail")
        assert (len(rated), len(other)) == (RATED_JOBS, OTHER_JOBS)
        _assert_paced(rated, TYPE_RATE)
        # Four times as many, submitted behind the rated backlog: all started while the
        # rated type had not gone through half of its own (about 0.3 s against 2.5 s on
        # a quiet machine; held behind it, they would come after).
        halfway = rated[RATED_JOBS // 2]
        assert other[-1] < halfway, (other[-1] - rated[0], halfway - rated[0])
    finally:
        await connection.close()
