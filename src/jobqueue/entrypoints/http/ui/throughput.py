"""What the overview's charts read: the rollup's last hour and last day (`ports.
ThroughputRollup`), of every queue or of one, drawn by `charts.py`."""

from __future__ import annotations

import asyncio
from typing import Final
from urllib.parse import urlencode

from jobqueue.domain.fields import check_queue
from jobqueue.domain.ports import ThroughputRollup
from jobqueue.domain.throughput import LAST_DAY, LAST_HOUR
from jobqueue.entrypoints.http.ui.charts import latency_chart, throughput_chart
from jobqueue.entrypoints.http.ui.frame import UI_PATH

# The rollup moves every few seconds (each worker's flush); a chart of minutes needs no
# fresher view than this.
CHARTS_REFRESH_SECONDS: Final = 15
CHARTS_FRAGMENT: Final = f"{UI_PATH}/fragments/charts"


def chosen_queue(queue: str | None) -> str | None:
    """The queue a chart is filtered to: None for every queue (the form's empty
    choice); a name that is no queue's is refused (`InvalidJob`, a 400)."""
    if not queue:
        return None
    check_queue(queue)
    return queue


class ThroughputCharts:
    """The charts' context for the templates, from `rollup` (None: a service without
    one, whose overview shows no charts)."""

    def __init__(self, rollup: ThroughputRollup | None) -> None:
        self._rollup = rollup

    async def context(self, queue: str | None) -> dict[str, object]:
        if self._rollup is None:
            return {"charts": None}
        # Two short statements on two pooled connections, side by side.
        hour, day = await asyncio.gather(
            self._rollup.series(LAST_HOUR, queue), self._rollup.series(LAST_DAY, queue)
        )
        query = "" if queue is None else f"?{urlencode({'queue': queue})}"
        return {
            "charts": [
                throughput_chart(hour, LAST_HOUR, queue),
                latency_chart(hour, LAST_HOUR, queue),
                throughput_chart(day, LAST_DAY, queue),
                latency_chart(day, LAST_DAY, queue),
            ],
            "chart_queue": queue,
            "charts_href": f"{CHARTS_FRAGMENT}{query}",
            "charts_refresh_seconds": CHARTS_REFRESH_SECONDS,
        }
