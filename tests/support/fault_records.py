"""What the fault tests read back: the executions the handlers of
tests/integration/fault_handlers.py recorded (the `start` lines of a job are its
executions), and the processes' JSON logs, where a SIGKILLed process may have left a
partial last line."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Execution:
    job_id: str
    attempt: int
    pid: int
    event: str  # "start" or "end"
    at: float  # unix time


def read_executions(path: Path) -> list[Execution]:
    """Every complete line of the executions file, in the order written."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            continue
        job_id, attempt, pid, event, at = line.split()
        records.append(Execution(job_id, int(attempt), int(pid), event, float(at)))
    return records


def starts_per_job(records: Iterable[Execution]) -> Counter[str]:
    """How many times each job's handler began: its executions."""
    return Counter(record.job_id for record in records if record.event == "start")


def log_records(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a process's stdout; a partial last line (the process was killed
    while writing it) is left out, anything else that is not JSON is an error."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    lines = text.splitlines(keepends=True)
    records = []
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines) - 1 and not line.endswith("\n"):
                continue
            raise
    return records


def log_time(record: dict[str, Any]) -> float:
    """The unix time of a log record's `ts`."""
    stamp = datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.replace(tzinfo=UTC).timestamp()


def completed_per_job(records: Iterable[dict[str, Any]]) -> Counter[str]:
    """How many `job finished` lines say `completed`, per job."""
    return Counter(
        record["job_id"]
        for record in records
        if record.get("message") == "job finished" and record.get("outcome") == "completed"
    )
