"""What a scenario measured: a throughput, a latency distribution or a few start-up times,
and its JSON form."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Throughput:
    jobs: int
    seconds: float
    # CPU time of this whole process (event loop and any threads) during the run. Near
    # `seconds`, the benchmark's own process was the bottleneck, not PostgreSQL.
    client_cpu_seconds: float
    # CPU time the `jobqueue` processes under test (worker processes, the API process)
    # spent during the run, all of them added up; None when the scenario started none,
    # or where the system has no /proc to read it from.
    service_cpu_seconds: float | None = None

    @property
    def per_second(self) -> float:
        return self.jobs / self.seconds

    @property
    def client_cpu_share(self) -> float:
        """Client CPU time over wall time: 1.0 is one core busy all along."""
        return self.client_cpu_seconds / self.seconds

    @property
    def service_cpu_per_job_us(self) -> float | None:
        if self.service_cpu_seconds is None:
            return None
        return self.service_cpu_seconds / self.jobs * 1e6

    def as_json(self) -> dict[str, float | int | str]:
        found: dict[str, float | int | str] = {
            "kind": "throughput",
            "jobs": self.jobs,
            "seconds": self.seconds,
            "jobs_per_second": self.per_second,
            "client_cpu_seconds": self.client_cpu_seconds,
            "client_cpu_share": self.client_cpu_share,
        }
        if self.service_cpu_seconds is not None and self.service_cpu_per_job_us is not None:
            found["service_cpu_seconds"] = self.service_cpu_seconds
            found["service_cpu_us_per_job"] = self.service_cpu_per_job_us
        return found


def median_run(runs: Sequence[Throughput]) -> Throughput:
    """The run of median throughput (the lower middle of an even count)."""
    return sorted(runs, key=lambda run: run.per_second)[(len(runs) - 1) // 2]


class Stopwatch:
    """Wall-clock and process CPU time from its creation."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def throughput(self, jobs: int, service_cpu_seconds: float | None = None) -> Throughput:
        return Throughput(
            jobs,
            time.perf_counter() - self._wall,
            time.process_time() - self._cpu,
            service_cpu_seconds,
        )


@dataclass(frozen=True, slots=True)
class Latency:
    samples: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        if len(seconds) < 2:
            raise ValueError(f"percentiles need at least 2 samples, got {len(seconds)}")
        # Inclusive method: cut points lie within the observed range, never beyond the
        # slowest sample, which small sample counts would otherwise extrapolate past.
        cuts = statistics.quantiles([s * 1000 for s in seconds], n=100, method="inclusive")
        return cls(
            samples=len(seconds),
            p50_ms=cuts[49],
            p95_ms=cuts[94],
            p99_ms=cuts[98],
            max_ms=max(seconds) * 1000,
        )

    def as_json(self) -> dict[str, float | int | str]:
        return {
            "kind": "latency",
            "samples": self.samples,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "p99_ms": self.p99_ms,
            "max_ms": self.max_ms,
        }


@dataclass(frozen=True, slots=True)
class StartupTime:
    """Wall times of a few process start-ups: too few runs for percentiles, so the median
    (the figure to quote) and the fastest (the least disturbed by a busy machine)."""

    runs: int
    median_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> StartupTime:
        if not seconds:
            raise ValueError("a start-up time needs at least 1 run")
        return cls(
            runs=len(seconds),
            median_ms=statistics.median(seconds) * 1000,
            min_ms=min(seconds) * 1000,
            max_ms=max(seconds) * 1000,
        )

    def as_json(self) -> dict[str, float | int | str]:
        return {
            "kind": "startup",
            "runs": self.runs,
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
        }


@dataclass(frozen=True, slots=True)
class Measurement:
    name: str  # stable key in the JSON, e.g. "drain.history.2pools"
    label: str  # what a reader of the table sees
    result: Throughput | Latency | StartupTime
