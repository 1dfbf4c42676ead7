"""DATABASE_POOLER: what a transaction pooler between the service and PostgreSQL takes
away (sessions), and the settings that must say so."""

from __future__ import annotations

import pytest

from jobqueue.adapters.postgres.pooler import Pooler
from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.service.provisioning import run_migrate
from jobqueue.entrypoints.service.runtime import StartupError
from tests.support.settings_problems import problems_of

BEHIND_PGBOUNCER = {
    "DATABASE_URL": "postgresql://jobqueue@pgbouncer:6432/jobs",
    "DATABASE_POOLER": "pgbouncer",
    "NOTIFY": "false",
    "AUTO_MIGRATE": "false",
}


def test_the_default_is_no_pooler_and_every_session_feature_stays_on() -> None:
    settings = Settings.from_env({})

    assert settings.database_pooler is Pooler.NONE
    assert Pooler.NONE.keeps_sessions
    assert not Pooler.PGBOUNCER.keeps_sessions


@pytest.mark.parametrize("raw", ["pgbouncer", "PgBouncer"])
def test_pgbouncer_is_read_in_any_case(raw: str) -> None:
    settings = Settings.from_env({**BEHIND_PGBOUNCER, "DATABASE_POOLER": raw})

    assert settings.database_pooler is Pooler.PGBOUNCER


def test_an_unknown_pooler_is_refused_with_the_choices() -> None:
    [problem] = problems_of({"DATABASE_POOLER": "odyssey"})

    assert problem == "DATABASE_POOLER: 'odyssey' is not a pooler; use none or pgbouncer"


@pytest.mark.parametrize(
    ("variable", "value", "needs"),
    [
        ("NOTIFY", "true", "needs NOTIFY=false: LISTEN does not work through a transaction"),
        ("AUTO_MIGRATE", "true", "needs AUTO_MIGRATE=false: migrations hold a session advisory"),
        ("DATABASE_URL", "", "needs DATABASE_URL, the pooler's address"),
    ],
)
def test_pgbouncer_refuses_what_needs_a_session(variable: str, value: str, needs: str) -> None:
    [problem] = problems_of({**BEHIND_PGBOUNCER, variable: value})

    assert problem.startswith(f"DATABASE_POOLER: pgbouncer {needs}")


def test_the_defaults_behind_pgbouncer_are_refused_all_at_once() -> None:
    problems = problems_of(
        {"DATABASE_URL": BEHIND_PGBOUNCER["DATABASE_URL"], "DATABASE_POOLER": "pgbouncer"}
    )

    assert [problem.split(":")[1].strip() for problem in problems] == [
        "pgbouncer needs NOTIFY=false",
        "pgbouncer needs AUTO_MIGRATE=false",
    ]


def test_settings_built_directly_are_checked_too() -> None:
    with pytest.raises(ConfigError, match="needs NOTIFY=false"):
        Settings(
            database_url="postgresql://u@h/d", database_pooler=Pooler.PGBOUNCER, auto_migrate=False
        )


async def test_jobqueue_migrate_refuses_to_run_through_the_pooler() -> None:
    settings = Settings.from_env(BEHIND_PGBOUNCER)

    with pytest.raises(StartupError, match="run `jobqueue migrate` with DATABASE_URL pointing at"):
        await run_migrate(settings)
