"""The one error of the benchmark: it cannot run, or a run went wrong."""

from __future__ import annotations


class BenchError(Exception):
    """The benchmark cannot run, or a run went wrong; the message says why."""
