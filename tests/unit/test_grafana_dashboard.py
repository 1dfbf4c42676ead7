"""The Grafana dashboard in deploy/grafana/ asks only for what the service exports: every
metric each panel's PromQL (and the queue variable's query) names is a sample of a family
in the `Metrics` registry, and every label it matches on or groups by is one of that
metric's. Read from the registry, so renaming a metric or a label fails here."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.metrics import every_series

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "jobqueue-dashboard.json"

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")
# A whole name (not a shorter one backtracked to) that is not a function's.
_NAME = re.compile(r"(?<![\w$.])([A-Za-z_:][\w:]*)(?![\w:]|\s*\()")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan"}
)
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*(\w+)\s*\)\s*$")


@dataclass
class Query:
    """What one PromQL expression asks of the service: the metrics it selects, the labels
    each is matched on, and the labels it groups by (which each metric must have)."""

    metrics: set[str] = field(default_factory=set)
    matched: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    grouped: set[str] = field(default_factory=set)


def parse(expr: str) -> Query:
    """The metric names and labels in `expr`: strings and range selectors left out, then
    `by (...)`-like groupings, then `{...}` selectors, then every name not called."""
    query = Query()
    text = _RANGE.sub("", _STRING.sub('""', expr))
    for labels in _GROUPING.findall(text):
        query.grouped.update(label.strip() for label in labels.split(",") if label.strip())
    text = _GROUPING.sub(" ", text)
    for metric, matchers in _SELECTOR.findall(text):
        labels = set(_MATCHER.findall(matchers))
        name = metric or next(
            (value for label, value in re.findall(r'(__name__)\s*=\s*"([^"]*)"', matchers)), ""
        )
        query.matched[name].update(labels - {"__name__"})
        if metric:
            query.metrics.add(metric)
    text = _SELECTOR.sub(lambda match: f" {match.group(1) or ''} ", text)
    for name in _NAME.findall(text):
        if name.lower() not in _KEYWORDS:
            query.metrics.add(name)
    return query


def exported() -> dict[str, set[str]]:
    """Each sample name the registry exports (a histogram's `_bucket`, `_sum`, `_count`, a
    counter's `_total`), with the labels of its series."""
    samples: dict[str, set[str]] = defaultdict(set)
    for family in every_series().registry.collect():
        for sample in family.samples:
            samples[sample.name].update(sample.labels)
    return samples


def problems(expr: str, samples: dict[str, set[str]]) -> list[str]:
    """What in `expr` the service does not export."""
    query = parse(expr)
    found: list[str] = []
    for metric in sorted(query.metrics):
        if metric not in samples:
            found.append(f"{metric}: no such metric")
            continue
        labels = query.matched.get(metric, set()) | query.grouped
        found += [f"{metric}: no label {label}" for label in sorted(labels - samples[metric])]
    return found


def dashboard() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return document


def expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel's every target, rows' nested panels too."""
    found: list[tuple[str, str]] = []
    panels: list[dict[str, Any]] = list(dashboard()["panels"])
    while panels:
        panel = panels.pop()
        panels += panel.get("panels", [])
        found += [(panel["title"], target["expr"]) for target in panel.get("targets", [])]
    return found


def variables() -> dict[str, dict[str, Any]]:
    return {each["name"]: each for each in dashboard()["templating"]["list"]}


@pytest.mark.parametrize(("title", "expr"), expressions(), ids=lambda x: str(x)[:60])
def test_every_panel_queries_only_what_the_service_exports(title: str, expr: str) -> None:
    assert parse(expr).metrics, f"{title}: no metric found in {expr}"
    assert not problems(expr, exported()), title


def test_the_queue_variable_lists_the_values_of_an_exported_queue_label() -> None:
    queue = variables()["queue"]
    query = queue["query"]["query"] if isinstance(queue["query"], dict) else queue["query"]

    match = _LABEL_VALUES.match(query)
    assert match is not None, query
    metric, label = match.groups()
    assert label == "queue"
    assert "queue" in exported().get(metric, set()), metric


def test_the_dashboard_is_a_grafana_dashboard_on_a_prometheus_source_variable() -> None:
    document = dashboard()
    assert document["schemaVersion"] >= 36
    assert variables()["datasource"]["type"] == "datasource"
    assert variables()["datasource"]["query"] == "prometheus"
    for panel in document["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    titles = {panel["title"] for panel in document["panels"]}
    assert {"Processing duration", "Pickup latency", "Queue depth by status"} <= titles
    # Each panel filtered by queue where its metric has the label: a dashboard whose
    # selector did nothing would pass the checks above.
    samples = exported()
    for title, expr in expressions():
        for metric in parse(expr).metrics:
            if "queue" in samples[metric]:
                assert "queue" in parse(expr).matched[metric], f"{title}: {expr}"


def test_the_parser_finds_metrics_and_labels_beneath_functions_and_groupings() -> None:
    query = parse(
        'histogram_quantile(0.95, sum by (le, type) (rate(job_x_seconds_bucket{queue=~"$q",'
        ' outcome!="a,b}"}[$__rate_interval]))) / on (type) group_left max(jobs_y) > bool 2'
    )

    assert query.metrics == {"job_x_seconds_bucket", "jobs_y"}
    assert query.matched["job_x_seconds_bucket"] == {"queue", "outcome"}
    assert query.grouped == {"le", "type"}


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ('sum(rate(jobs_completd_total{queue=~"$queue"}[5m]))', "jobs_completd_total"),
        ("rate(job_pickup_latency_seconds[5m])", "job_pickup_latency_seconds"),
        ('sum(rate(jobs_completed_total{queeu="a"}[5m]))', "no label queeu"),
        ("sum by (outcome) (rate(jobs_retried_total[5m]))", "no label outcome"),
        ("max by (queue) (jobs_queue_depth)", "no label queue"),
    ],
)
def test_a_typo_in_a_metric_or_a_label_is_a_problem(expr: str, problem: str) -> None:
    assert any(problem in each for each in problems(expr, exported()))
