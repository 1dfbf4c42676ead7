"""How big a run is: the full run's sizes, `--quick`'s, the list of process counts, and
which scenarios run (`--only`)."""

from __future__ import annotations

from dataclasses import dataclass

from jobqueue.domain.dependencies import MAX_DEPENDENCIES
from jobqueue.wire.requests import MAX_BATCH_JOBS

# The groups of scenarios, in the order they run; `--only` picks some.
STARTUP = "startup"  # a worker process's start-up
ENQUEUE = "enqueue"  # in-process enqueues
IN_PROCESS = "in-process"  # in-process drains (plain, limited, keyed) and pickups
# Through `jobqueue api` and `jobqueue worker` processes: HTTP enqueues, pickups, waits
# for jobs' ends, drains with 1, 2, 4 processes.
PROCESSES = "processes"
CHAIN = "chain"  # a chain of jobs, each after the one before (`graphs.py`)
FAN = "fan"  # layers of jobs, each after jobs of the layer before (`graphs.py`)
SCHEDULED = "scheduled"  # the in-process runs again, beside many scheduled jobs
HISTORY = "history"  # and beside many finished jobs
SCENARIOS = (STARTUP, ENQUEUE, IN_PROCESS, PROCESSES, CHAIN, FAN, SCHEDULED, HISTORY)


@dataclass(frozen=True, slots=True)
class Sizes:
    jobs: int  # per in-process enqueue run, per HTTP enqueue run and per in-process drain
    workers: int  # per in-process pool
    # Pending jobs due a day from now on, in the queue and priority the drains claim from,
    # for another round of drains and pickups; 0 skips it.
    scheduled_rows: int
    finished_rows: int  # history for the last round of drains and pickups; 0 skips it
    latency_samples: int  # per pickup run
    wait_samples: int  # per run of waits for a job's end
    startup_runs: int  # timed worker start-ups
    drain_jobs: int  # per drain with `jobqueue worker` processes
    processes: tuple[int, ...]  # worker process counts drained with, ascending
    process_workers: int  # WORKERS of each `jobqueue worker` process
    chain_jobs: int  # jobs of the chain, each after the one before; 0 skips it
    fan_layers: int  # layers of the fan-out/fan-in, 0 skips it; then one job after the last
    fan_width: int  # jobs per layer of the fan
    # Jobs of the layer before each job of the fan waits for; None: all of them.
    fan_in: int | None = None
    submitters: tuple[int, ...] = (1, 8)
    http_clients: int = 8
    # Clients of POST /jobs/batch. One: a lone producer, each request's decoding, insert
    # and answer one after the other. Four, twice the cores of the machines this runs on:
    # the one API process always has the next batch to decode while PostgreSQL writes
    # another, so it shows the API's ceiling (more clients would only queue).
    http_batch_clients: tuple[int, ...] = (1, 4)
    # Jobs per transaction in the bulk enqueues, in-process and per POST /jobs/batch.
    batch: int = 1_000
    # Jobs per second submitted in the pickup runs into a worker process; the gaps between
    # them are drawn at random around 1 / rate.
    pickup_rate: float = 200.0
    # Waiters at once in the second run of waits for a job's end (the first has one).
    concurrent_waiters: int = 50

    def __post_init__(self) -> None:
        if list(self.processes) != sorted(set(self.processes)) or not self.processes:
            raise ValueError(f"processes must be ascending and distinct, got {self.processes}")
        if self.processes[0] < 1:
            raise ValueError(f"a drain needs at least 1 worker process, got {self.processes}")
        if not 1 <= self.batch <= MAX_BATCH_JOBS:
            raise ValueError(
                f"a batch is 1 to {MAX_BATCH_JOBS} jobs (POST /jobs/batch), got {self.batch}"
            )
        # The fan's last job waits for the whole last layer.
        if not 1 <= self.fan_width <= MAX_DEPENDENCIES:
            raise ValueError(f"a fan's layer is 1 to {MAX_DEPENDENCIES} jobs, got {self.fan_width}")
        if self.fan_in is not None and not 1 <= self.fan_in <= self.fan_width:
            raise ValueError(
                f"a fan's job waits for 1 to {self.fan_width} jobs of the layer before (its "
                f"width), got {self.fan_in}"
            )

    @property
    def fan_waits_for(self) -> int:
        """How many jobs of the layer before each job of the fan waits for."""
        return self.fan_width if self.fan_in is None else self.fan_in


DEFAULT_SIZES = Sizes(
    jobs=10_000,
    workers=8,
    scheduled_rows=100_000,
    finished_rows=1_000_000,
    latency_samples=200,
    wait_samples=300,
    startup_runs=5,
    drain_jobs=20_000,
    processes=(1, 2, 4),
    process_workers=10,
    chain_jobs=1_000,
    fan_layers=10,
    fan_width=100,
)
QUICK_SIZES = Sizes(
    jobs=100,
    workers=4,
    scheduled_rows=2_000,
    finished_rows=2_000,
    latency_samples=10,
    wait_samples=10,
    startup_runs=1,
    drain_jobs=200,
    processes=(1, 2),
    process_workers=4,
    chain_jobs=20,
    fan_layers=3,
    fan_width=10,
    batch=25,
    concurrent_waiters=5,
)


def parse_processes(text: str) -> tuple[int, ...]:
    """`1,2,4` → (1, 2, 4): distinct counts of at least 1, in any order, returned ascending."""
    counts = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"{text!r}: each process count is a whole number of at least 1")
        counts.append(int(part))
    if len(set(counts)) != len(counts):
        raise ValueError(f"{text!r}: a process count is given twice")
    return tuple(sorted(counts))


def parse_scenarios(text: str) -> tuple[str, ...]:
    """`fan,chain` → ("chain", "fan"): names of `SCENARIOS`, in any order, returned in the
    order they run."""
    names = [part.strip() for part in text.split(",")]
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        raise ValueError(
            f"{text!r}: no scenario {unknown[0]!r}; the scenarios are {', '.join(SCENARIOS)}"
        )
    return tuple(name for name in SCENARIOS if name in names)
