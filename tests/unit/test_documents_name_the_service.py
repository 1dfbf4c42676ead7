"""The user documents (the README and the guide's pages, not the design notes) name what
the service shows its users: every metric it exports, with each value of a label that
takes a closed set of them; every outcome its `job finished` line carries; every route.
Each list is read from the code, so what is added there fails here until it is
documented. The settings are held to the README's table by `test_readme_settings.py`."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from litestar.routes import HTTPRoute
from prometheus_client import CollectorRegistry, ProcessCollector

from jobqueue.adapters.telemetry.metrics import JOB_LABELS
from jobqueue.domain.attempts import Outcome
from tests.fakes import InMemoryJobStore
from tests.support.api import build_api
from tests.support.documents import USER_DOCUMENTS, passages
from tests.support.metrics import EXAMPLE_PAIR, every_series

# Outcomes no log line carries: an attempt still running has not ended, and an expired
# lease is written to the history by recovery (the worker that ran it logs `lease_lost`,
# if it lives). The documents still name them, where they describe the history.
NOT_LOGGED = frozenset({Outcome.RUNNING, Outcome.LEASE_EXPIRED})
# Litestar's own routes under the docs path, which no user visits: the handler behind
# the page's other paths (any other name answers 404) and Swagger UI's OAuth2 redirect,
# of no use with bearer tokens.
UNDOCUMENTED_ROUTES = frozenset({"/schema/{path:str}", "/schema/oauth2-redirect.html"})
# Answered wherever GET is (Litestar adds them); the HTTP page says so once.
IMPLIED_METHODS = frozenset({"HEAD", "OPTIONS"})

_CODE_SPAN = re.compile(r"`([^`]+)`")
_PARAMETER = re.compile(r"\{[^}]*\}")


@pytest.fixture(scope="module")
def documents() -> list[str]:
    """Every passage of the user documents."""
    return [
        passage
        for document in USER_DOCUMENTS
        for passage in passages(document.read_text(encoding="utf-8"))
    ]


def exported_metrics() -> dict[str, dict[str, set[str]]]:
    """Each metric as scraped (a counter with its `_total`), with the values of its labels
    in every series it may have (`every_series`). The process collector's metrics are
    the library's, documented by it."""
    metrics = every_series()
    library = {family.name for family in ProcessCollector(registry=CollectorRegistry()).collect()}
    exported: dict[str, dict[str, set[str]]] = {}
    for family in metrics.registry.collect():
        if family.name in library:
            continue
        name = f"{family.name}_total" if family.type == "counter" else family.name
        labels = exported.setdefault(name, defaultdict(set))
        for sample in family.samples:
            for label, value in sample.labels.items():
                if label != "le":  # a histogram's buckets, not a label of ours
                    labels[label].add(value)
    return exported


def documented_label_values(documents: list[str], metric: str, label: str) -> set[str]:
    """The values documents give `label` of `metric`, written `metric{label="a"|"b"}`."""
    found: set[str] = set()
    for passage in documents:
        for labels in re.findall(rf"(?<!\w){re.escape(metric)}\{{([^}}]*)\}}", passage):
            for name, values in re.findall(r'(\w+)=((?:"[^"]*"\|?)+)', labels):
                if name == label:
                    found.update(re.findall(r'"([^"]*)"', values))
    return found


def documented_labels(documents: list[str], metric: str) -> set[str]:
    """The labels documents name inside `metric{...}`, with values or without."""
    return {
        name
        for passage in documents
        for labels in re.findall(rf"(?<!\w){re.escape(metric)}\{{([^}}]*)\}}", passage)
        for name in re.findall(r"(\w+)\s*(?:=|,|$)", labels)
    }


def test_every_metric_and_each_value_of_its_labels_is_documented(documents: list[str]) -> None:
    text = "\n".join(documents)
    missing: list[str] = []
    for metric, labels in sorted(exported_metrics().items()):
        if not re.search(rf"(?<!\w){re.escape(metric)}(?!\w)", text):
            missing.append(metric)
            continue
        for label, values in sorted(labels.items()):
            if label in JOB_LABELS:
                # Open sets (the handlers' types, the queues consumed): named, not listed.
                if label not in documented_labels(documents, metric):
                    missing.append(f"{metric}{{{label}}}")
                continue
            documented = documented_label_values(documents, metric, label)
            missing += [f'{metric}{{{label}="{value}"}}' for value in sorted(values - documented)]

    assert not missing, f"metrics the documents do not name: {', '.join(missing)}"


def test_every_outcome_of_the_job_finished_line_is_documented_with_it(
    documents: list[str],
) -> None:
    described = {
        span
        for passage in documents
        if "`job finished`" in passage
        for span in _CODE_SPAN.findall(passage)
    }
    missing = sorted(outcome.value for outcome in Outcome if outcome not in NOT_LOGGED)
    missing = [outcome for outcome in missing if outcome not in described]

    assert described, "no passage of the documents describes the `job finished` line"
    assert not missing, f"outcomes the `job finished` line's description leaves out: {missing}"


def test_the_outcomes_no_line_carries_are_documented_too(documents: list[str]) -> None:
    named = {span for passage in documents for span in _CODE_SPAN.findall(passage)}

    assert not sorted(outcome.value for outcome in NOT_LOGGED if outcome.value not in named)


def served_routes() -> set[tuple[str, str]]:
    """(method, path) of every route the app serves, as its route table has them."""
    app = build_api(store=InMemoryJobStore()).app
    served: set[tuple[str, str]] = set()
    for route in app.routes:
        if route.path in UNDOCUMENTED_ROUTES:
            continue
        # The API serves plain HTTP routes only; another kind would need a check of its own.
        assert isinstance(route, HTTPRoute), f"{route.path} is a {type(route).__name__}"
        served.update(
            (method, route.path)
            for handler in route.route_handlers
            for method in handler.http_methods - IMPLIED_METHODS
        )
    return served


def is_documented(documents: list[str], method: str, path: str) -> bool:
    """Whether a passage names `method` and `path`, its parameters written `{any name}`:
    a table row (`| POST | /jobs/{id}/retry |`) or a sentence. An example's URL
    (`localhost:8080/jobs/…`) is not a mention."""
    pattern = "".join(
        r"\{[^}/]+\}" if _PARAMETER.fullmatch(part) else re.escape(part)
        for part in re.split(r"(\{[^}]*\})", path)
    )
    mention = re.compile(rf"(?<![\w/.:-]){pattern}(?![\w/.-])")
    word = re.compile(rf"\b{method}\b")
    return any(mention.search(passage) and word.search(passage) for passage in documents)


def test_every_route_is_documented_with_its_method(documents: list[str]) -> None:
    routes = served_routes()
    missing = sorted(
        f"{method} {path}" for method, path in routes if not is_documented(documents, method, path)
    )

    assert ("GET", "/jobs") in routes, "the route table was not read"
    assert not missing, f"routes the documents do not name: {', '.join(missing)}"


def test_a_route_is_found_in_a_table_row_but_not_in_an_example_url() -> None:
    documents = [
        "| POST | `/jobs/{id}/retry`, `/jobs/{id}/cancel` | retry; cancel |",
        "curl -sS -X DELETE localhost:8080/jobs/2f0c6d7d-…",
    ]

    assert is_documented(documents, "POST", "/jobs/{job_id:str}/cancel")
    assert not is_documented(documents, "GET", "/jobs/{job_id:str}/cancel")
    assert not is_documented(documents, "POST", "/jobs/{job_id:str}")
    assert not is_documented(documents, "DELETE", "/jobs/{job_id:str}")


def test_label_values_are_read_as_metric_label_alternatives() -> None:
    documents = ['`jobs_pruned_total{status="completed"|"failed"}` and `jobs_x{outcome}`']

    assert documented_label_values(documents, "jobs_pruned_total", "status") == {
        "completed",
        "failed",
    }
    assert documented_label_values(documents, "jobs_x", "outcome") == set()


def test_labels_are_read_with_or_without_their_values() -> None:
    documents = ['`job_x_seconds{queue,type,outcome="completed"|"failed"}`, `jobs_y{type}`']

    assert documented_labels(documents, "job_x_seconds") == {"queue", "type", "outcome"}
    assert documented_labels(documents, "jobs_y") == {"type"}
    assert documented_labels(documents, "jobs_z") == set()


def test_the_series_checked_include_a_pairs_and_their_labels() -> None:
    exported = exported_metrics()

    assert exported["jobs_completed_total"]["type"] == {EXAMPLE_PAIR["type"]}
    assert exported["job_pickup_latency_seconds"]["queue"] == {EXAMPLE_PAIR["queue"]}
    assert exported["jobs_failed_total"]["status"] == {"failed", "dead_letter"}
