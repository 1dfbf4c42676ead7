"""Cron expressions, read by croniter (maintained by pallets-eco): the schedule of a
periodic job (`domain.periodic.Schedule`).

Five fields (minute resolution), or six with the seconds first (`*/5 * * * * *`: every
five seconds). Slots are computed in the job's time zone, so `0 3 * * *` in
Europe/Paris is 03:00 Paris time through daylight saving changes, and returned as
aware datetimes.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from croniter import croniter

from jobqueue.domain.periodic import PeriodicJob, Schedule
from jobqueue.domain.registry import Registry


class CronSchedule:
    def __init__(self, periodic: PeriodicJob) -> None:
        self._expression = periodic.cron
        self._seconds = len(periodic.cron.split()) == 6
        self._zone = ZoneInfo(periodic.timezone)
        if not croniter.is_valid(self._expression, second_at_beginning=self._seconds):
            raise ValueError(
                f"periodic job {periodic.name!r}: {periodic.cron!r} is not a cron expression "
                "(5 fields, or 6 with the seconds first)"
            )

    def next_after(self, moment: datetime) -> datetime:
        return self._iterator(moment).get_next(datetime)

    def latest_before(self, moment: datetime) -> datetime:
        return self._iterator(moment).get_prev(datetime)

    def _iterator(self, moment: datetime) -> croniter:
        return croniter(
            self._expression,
            moment.astimezone(self._zone),
            second_at_beginning=self._seconds,
        )


def schedules(registry: Registry) -> list[tuple[PeriodicJob, Schedule]]:
    """Each periodic job of `registry` with its cron schedule; raises `ValueError` for an
    expression that is none (at start, naming the job)."""
    return [(periodic, CronSchedule(periodic)) for periodic in registry.periodic_jobs()]
