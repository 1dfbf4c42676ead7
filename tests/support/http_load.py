"""An HTTP client that keeps submitting `work` jobs at a steady rate, and probes that
watch `/healthz` and `/readyz` meanwhile, for the fault tests."""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP request: when it went out and came back (unix time), and how it ended."""

    started: float
    ended: float
    status: int | None  # None: no answer (`error` says why)
    retry_after: str | None = None
    error: str | None = None

    @property
    def seconds(self) -> float:
        return self.ended - self.started


@dataclass
class Load:
    """Submits `work` jobs over HTTP at about `rate` per second from `threads` threads.

    Every submission has an Idempotency-Key of its own and is retried, with the same key,
    until it is accepted (201, or 200 for a replay): after a 503's Retry-After, or one
    second after no answer. Once `stop()` is called no new submission starts; those in
    progress keep trying until `give_up_at`.
    """

    base_url: str
    rate: float
    threads: int = 1
    timeout: float = 5.0
    give_up_after: float = 30.0
    rng: random.Random = field(default_factory=lambda: random.Random(11))
    accepted: dict[str, str] = field(default_factory=dict)  # key -> job id
    answers: list[Answer] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped_at: float | None = None

    def start(self) -> Load:
        for index in range(self.threads):
            thread = threading.Thread(target=self._submit_forever, args=(index,), daemon=True)
            thread.start()
            self._workers.append(thread)
        return self

    def stop(self) -> None:
        self._stopped_at = time.monotonic()
        self._stopping.set()

    def join(self) -> None:
        for thread in self._workers:
            thread.join(timeout=self.give_up_after + self.timeout + 5)
        alive = [thread for thread in self._workers if thread.is_alive()]
        if alive:
            raise AssertionError(f"{len(alive)} submitting threads did not finish")

    def _submit_forever(self, index: int) -> None:
        period = self.threads / self.rate
        next_at = time.monotonic() + period * index / self.threads
        with httpx.Client(base_url=self.base_url, timeout=self.timeout) as client:
            while not self._stopping.is_set():
                delay = next_at - time.monotonic()
                if delay > 0 and self._stopping.wait(delay):
                    break
                self._submit(client)
                next_at = max(next_at + period, time.monotonic())

    def _submit(self, client: Any) -> None:
        key = uuid.uuid4().hex
        body = {"type": "work", "payload": {"ms": self.rng.randint(5, 50)}}
        while True:
            started = time.time()
            try:
                response = client.post("/jobs", json=body, headers={"Idempotency-Key": key})
            except httpx.HTTPError as error:
                self._answered(Answer(started, time.time(), None, error=repr(error)))
                wait = 1.0
            else:
                retry_after = response.headers.get("Retry-After")
                self._answered(Answer(started, time.time(), response.status_code, retry_after))
                if response.status_code in (200, 201):
                    with self._lock:
                        self.accepted[key] = response.json()["id"]
                    return
                if response.status_code != 503:
                    with self._lock:
                        self.given_up.append(key)
                    return
                wait = _seconds(retry_after)
            if (
                self._stopped_at is not None
                and time.monotonic() > self._stopped_at + self.give_up_after
            ):
                with self._lock:
                    self.given_up.append(key)
                return
            time.sleep(wait)  # what the server asked for, not a wait for a condition

    def _answered(self, answer: Answer) -> None:
        with self._lock:
            self.answers.append(answer)


def _seconds(retry_after: str | None) -> float:
    try:
        return max(0.0, min(float(retry_after or 1), 10.0))
    except ValueError:
        return 1.0


@dataclass
class Probe:
    """GETs `path` every `every` seconds (each with `timeout`) until stopped."""

    base_url: str
    path: str
    every: float = 0.2
    timeout: float = 2.0
    answers: list[Answer] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Probe:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 5)

    def _run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=self.timeout) as client:
            while not self._stopping.is_set():
                started = time.time()
                try:
                    response = client.get(self.path)
                except httpx.HTTPError as error:
                    self.answers.append(Answer(started, time.time(), None, error=repr(error)))
                else:
                    self.answers.append(Answer(started, time.time(), response.status_code))
                self._stopping.wait(max(0.0, started + self.every - time.time()))
