"""What the tests of the dependency migrations (0024 on) share: the triggers 0023 and
0024 leave on `jobs`, and a job of a status (and other columns) inserted by SQL."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

TRIGGERS_0023 = {"jobs_announce_ending", "jobs_announce_deleted"}
TRIGGERS_0024 = TRIGGERS_0023 | {"jobs_note_ending", "jobs_note_deleted", "jobs_release_dependents"}


async def _insert(connection: asyncpg.Connection, status: str, **columns: Any) -> UUID:
    names = ", ".join(["type", "max_attempts", "status", *columns])
    places = ", ".join(f"${n}" for n in range(1, len(columns) + 4))
    job_id: UUID = await connection.fetchval(
        f"INSERT INTO jobs ({names}) VALUES ({places}) RETURNING id",
        "d",
        3,
        status,
        *columns.values(),
    )
    return job_id
