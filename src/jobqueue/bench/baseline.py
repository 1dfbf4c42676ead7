"""An earlier run's figures (`--baseline`, a file `--json` wrote) set against this run's.

Scenarios are matched by their stable name. The earlier file may come from an older
`jobqueue bench`: a scenario, or a figure of one, that either side lacks is compared as
missing, never as an error; only a file that is no report at all is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Figure:
    key: str  # in a metric's JSON
    header: str
    digits: int  # after the decimal point, as shown


# The figures compared, for each kind of metric: those a reader quotes.
FIGURES: dict[str, tuple[Figure, ...]] = {
    "throughput": (
        Figure("jobs_per_second", "jobs/s", 0),
        Figure("service_cpu_us_per_job", "µs/job", 0),
    ),
    "latency": (Figure("p50_ms", "p50 ms", 1), Figure("p99_ms", "p99 ms", 1)),
    "startup": (Figure("median_ms", "median ms", 0),),
}


@dataclass(frozen=True, slots=True)
class Baseline:
    path: Path
    environment: Mapping[str, Any]
    settings: Mapping[str, Any]
    metrics: Mapping[str, Mapping[str, Any]]  # by name, as `--json` wrote them


def load(path: Path) -> Baseline:
    """The report at `path`; ValueError, saying why, when it is not one."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not JSON: {error}") from None
    metrics = found.get("metrics") if isinstance(found, dict) else None
    if not isinstance(metrics, dict):
        raise ValueError(f"{path} is not a report of `jobqueue bench --json`: no metrics")
    return Baseline(
        path,
        _mapping(found.get("environment")),
        _mapping(found.get("settings")),
        {name: metric for name, metric in metrics.items() if isinstance(metric, dict)},
    )


@dataclass(frozen=True, slots=True)
class Pair:
    before: float | None
    now: float | None

    @property
    def ratio(self) -> float | None:
        """This run's figure over the baseline's; None unless both are there."""
        if self.before is None or self.now is None or self.before <= 0:
            return None
        return self.now / self.before


@dataclass(frozen=True, slots=True)
class Compared:
    name: str
    label: str
    kind: str
    pairs: tuple[Pair, ...]  # one per figure of FIGURES[kind], in its order


def compare(now: Mapping[str, Mapping[str, Any]], baseline: Baseline) -> list[Compared]:
    """Every scenario of this run (`now`: metrics as the JSON holds them) in its order,
    then those only the baseline has, each with its figures on both sides."""
    names = list(now) + [name for name in baseline.metrics if name not in now]
    found = []
    for name in names:
        mine, theirs = now.get(name, {}), baseline.metrics.get(name, {})
        kind = _kind(mine) or _kind(theirs)
        if kind is None:
            continue  # neither side says what it is: nothing to set side by side
        label = mine.get("label") or theirs.get("label") or name
        pairs = tuple(
            Pair(_number(theirs.get(each.key)), _number(mine.get(each.key)))
            for each in FIGURES[kind]
        )
        found.append(Compared(name, str(label), kind, pairs))
    return found


def differing_settings(now: Mapping[str, Any], baseline: Baseline) -> list[str]:
    """The settings both runs name but ran with different values, as `name: then → now`:
    a run of other sizes measures something else."""
    # As JSON holds them, so that a tuple of this run equals the list the file holds.
    mine = json.loads(json.dumps(dict(now)))
    return [
        f"{name}: {baseline.settings[name]} → {value}"
        for name, value in mine.items()
        if name in baseline.settings and baseline.settings[name] != value
    ]


def as_json(compared: list[Compared], baseline: Baseline) -> dict[str, Any]:
    return {
        "path": str(baseline.path),
        "environment": dict(baseline.environment),
        "ratios": {each.name: ratios for each in compared if (ratios := _ratios(each))},
    }


def _ratios(compared: Compared) -> dict[str, float]:
    return {
        figure.key: pair.ratio
        for figure, pair in zip(FIGURES[compared.kind], compared.pairs, strict=True)
        if pair.ratio is not None
    }


def _kind(metric: Mapping[str, Any]) -> str | None:
    kind = metric.get("kind")
    if kind in FIGURES:
        return str(kind)
    # A metric that does not say its kind: the one whose figures it holds.
    for name, figures in FIGURES.items():
        if figures[0].key in metric:
            return name
    return None


def _number(value: object) -> float | None:
    # bool is an int to Python, never a figure.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
