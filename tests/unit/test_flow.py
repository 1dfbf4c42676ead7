"""Queue limits as people write them (API, CLI, QUEUE_LIMITS, `Registry.limit`), and what a
claim's headroom says held it back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobqueue.domain.flow import (
    NO_LIMITS,
    Claimed,
    Headroom,
    Limit,
    QueueLimits,
    Rate,
    limits_in_use,
    type_rates,
)
from jobqueue.domain.registry import Registry
from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.service.queue_limits import declared_limits


@pytest.mark.parametrize(
    ("text", "limit", "period", "shown"),
    [
        ("100/1m", 100, timedelta(minutes=1), "100/m"),
        ("20/s", 20, timedelta(seconds=1), "20/s"),
        (" 5 / 500ms ", 5, timedelta(milliseconds=500), "5/500ms"),
        ("3/1m30s", 3, timedelta(seconds=90), "3/90s"),
        ("7/24h", 7, timedelta(hours=24), "7/24h"),
    ],
)
def test_a_rate_is_starts_per_period(text: str, limit: int, period: timedelta, shown: str) -> None:
    rate = Rate.parse(text)
    assert (rate.limit, rate.period, str(rate)) == (limit, period, shown)
    assert Rate.parse(str(rate)) == rate


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("lots", "starts per period"),
        ("0/s", "between 1 and"),
        ("10001/s", "between 1 and"),
        ("5/50ms", "between 100ms and 24h"),
        ("5/25h", "between 100ms and 24h"),
        ("5/2d", "invalid duration"),
    ],
)
def test_a_bad_rate_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Rate.parse(text)


def test_limits_are_written_as_name_value_pairs() -> None:
    limits = QueueLimits.parse("concurrency=5 rate=100/1m")
    assert limits == QueueLimits(5, Rate(100, timedelta(minutes=1)))
    assert QueueLimits.parse(str(limits)) == limits
    keyed = QueueLimits.parse("key_concurrency=2 concurrency=4")
    assert keyed == QueueLimits(concurrency=4, key_concurrency=2)
    assert str(keyed) == "concurrency=4 key_concurrency=2"
    assert QueueLimits(key_concurrency=1).any
    assert str(NO_LIMITS) == "none"
    key_rated = QueueLimits.parse("key_rate=10/1m key_concurrency=2")
    assert key_rated == QueueLimits(key_concurrency=2, key_rate=Rate(10, timedelta(minutes=1)))
    assert str(key_rated) == "key_concurrency=2 key_rate=10/m"
    assert QueueLimits.parse(str(key_rated)) == key_rated
    for bad, says in (
        ("", "no limit given"),
        ("speed=3", "key_rate=N/PERIOD or type_rate=TYPE:N/PERIOD"),
        ("concurrency=x", "whole number"),
        ("key_concurrency=2.5", "key_concurrency must be a whole number"),
        ("concurrency=0", "between 1 and"),
        ("key_concurrency=10001", "key concurrency limit must be between 1 and 10000"),
        ("concurrency=2 concurrency=3", "given twice"),
        ("key_rate=fast", "a rate is starts per period"),
        ("key_rate=0/1m", "a rate limit must be between 1 and 10000, got 0"),
        ("key_rate=5/2d", "invalid duration"),
        ("key_rate=1/s key_rate=2/s", "key_rate is given twice"),
    ):
        with pytest.raises(ValueError, match=says):
            QueueLimits.parse(bad)


def test_a_type_s_rate_is_written_type_colon_rate_once_per_type() -> None:
    limits = QueueLimits.parse("type_rate=send_sms:10/s rate=100/1m type_rate=app.mail:2/1m")
    assert limits.type_rates == (
        ("app.mail", Rate(2, timedelta(minutes=1))),
        ("send_sms", Rate(10, timedelta(seconds=1))),
    )
    assert limits.rate == Rate(100, timedelta(minutes=1))
    assert limits.type_rate("send_sms") == Rate(10, timedelta(seconds=1))
    assert limits.type_rate("other") is None
    assert str(limits) == "rate=100/m type_rate=app.mail:2/m type_rate=send_sms:10/s"
    assert QueueLimits.parse(str(limits)) == limits
    # A type's name may hold colons: the rate is what follows the last one.
    assert QueueLimits.parse("type_rate=a:b:3/s").type_rates == (
        ("a:b", Rate(3, timedelta(seconds=1))),
    )
    assert QueueLimits(type_rates=type_rates({"x": Rate(1, timedelta(seconds=1))})).any
    for bad, says in (
        ("type_rate=10/s", "a type rate is TYPE:STARTS/PERIOD"),
        ("type_rate=sms:fast", "type 'sms': a rate is starts per period"),
        ("type_rate=sms:1/s type_rate=sms:2/s", "the rate of type 'sms' is given twice"),
        ("type_rate=sms:1/s key_concurrency=2", "cannot be combined with limits per partition key"),
    ):
        with pytest.raises(ValueError, match=says):
            QueueLimits.parse(bad)
    with pytest.raises(ValueError, match="at most 50 types"):
        type_rates({f"t{n}": Rate(1, timedelta(seconds=1)) for n in range(51)})
    with pytest.raises(ValueError, match="in type order"):
        QueueLimits(
            type_rates=(("b", Rate(1, timedelta(seconds=1))), ("a", Rate(1, timedelta(seconds=1))))
        )


def test_queue_limits_settings_name_each_queue() -> None:
    settings = Settings.from_env(
        {"QUEUE_LIMITS": "emails concurrency=5 rate=100/1m; reports concurrency=2;"}
    )
    assert settings.queue_limits == (
        ("emails", QueueLimits(5, Rate(100, timedelta(minutes=1)))),
        ("reports", QueueLimits(2)),
    )
    with pytest.raises(ConfigError, match="QUEUE_LIMITS: queue 'a': concurrency must be"):
        Settings.from_env({"QUEUE_LIMITS": "a concurrency=many"})
    with pytest.raises(ConfigError, match="listed twice"):
        Settings.from_env({"QUEUE_LIMITS": "a concurrency=1; a concurrency=2"})
    keyed = Settings.from_env({"QUEUE_LIMITS": "tenants key_concurrency=2 key_rate=10/1m"})
    assert keyed.queue_limits == (
        ("tenants", QueueLimits(key_concurrency=2, key_rate=Rate(10, timedelta(minutes=1)))),
    )
    with pytest.raises(ConfigError, match="QUEUE_LIMITS: queue 'a': a rate is starts per"):
        Settings.from_env({"QUEUE_LIMITS": "a key_rate=fast"})


@pytest.mark.parametrize(
    ("limits", "shown"),
    [
        (QueueLimits(), ""),
        (QueueLimits(concurrency=5), "3 of 5 running"),
        (
            QueueLimits.parse("concurrency=5 rate=100/1m key_concurrency=2 key_rate=10/1m"),
            "3 of 5 running, 40 of 100/m started, 2 running per key, 10/m started per key",
        ),
        (QueueLimits.parse("key_rate=2/s"), "2/s started per key"),
        (
            QueueLimits.parse("concurrency=5 type_rate=sms:10/s type_rate=fax:1/m"),
            "3 of 5 running, 4 of 1/m fax started, 4 of 10/s sms started",
        ),
    ],
)
def test_limits_in_use_read_as_people_say_them(limits: QueueLimits, shown: str) -> None:
    def text(limits: QueueLimits, *, declared: bool = False) -> str:
        return limits_in_use(
            limits.concurrency,
            3,
            None if limits.rate is None else str(limits.rate),
            40,
            limits.key_concurrency,
            None if limits.key_rate is None else str(limits.key_rate),
            [(name, str(rate), 4) for name, rate in limits.type_rates],
            declared=declared,
        )

    assert text(limits) == shown
    # Limits declared in settings say so; no limits say nothing, declared or not.
    assert text(limits, declared=True) == (f"{shown}, (QUEUE_LIMITS)" if shown else "")


def test_settings_override_code_queue_by_queue_and_a_consumed_queue_without_is_lifted() -> None:
    registry = Registry()
    registry.limit("emails", concurrency=10)
    registry.limit("reports", rate="5/s", key_concurrency=1, key_rate="10/1m")
    registry.limit("tenants", key_rate=Rate(2, timedelta(seconds=1)))
    declared = declared_limits(
        registry.queue_limits, (("emails", QueueLimits(3)),), ["default", "emails"]
    )
    assert declared == {
        "default": NO_LIMITS,
        "emails": QueueLimits(3),
        "reports": QueueLimits(
            rate=Rate(5, timedelta(seconds=1)),
            key_concurrency=1,
            key_rate=Rate(10, timedelta(minutes=1)),
        ),
        "tenants": QueueLimits(key_rate=Rate(2, timedelta(seconds=1))),
    }
    with pytest.raises(ValueError, match="a rate is starts per period"):
        registry.limit("others", key_rate="fast")
    other = Registry()
    other.limit("emails", concurrency=11)
    with pytest.raises(ValueError, match="limited twice"):
        registry.include(other)


def test_registry_limit_takes_type_rates_as_text_or_rates_and_refuses_a_bad_one() -> None:
    registry = Registry()
    registry.limit(
        "texts",
        concurrency=4,
        type_rates={"send_sms": "10/s", "fax": Rate(1, timedelta(minutes=1))},
    )
    assert registry.queue_limits["texts"] == QueueLimits(
        concurrency=4,
        type_rates=(
            ("fax", Rate(1, timedelta(minutes=1))),
            ("send_sms", Rate(10, timedelta(seconds=1))),
        ),
    )
    assert str(registry.queue_limits["texts"]) == (
        "concurrency=4 type_rate=fax:1/m type_rate=send_sms:10/s"
    )
    for rates, says in (
        # Which type's rate is wrong is named.
        ({"fax": "1/m", "send_sms": "fast"}, "type 'send_sms': a rate is starts per period"),
        ({"send_sms": "0/s"}, "type 'send_sms': a rate limit must be between 1 and"),
        ({"": "1/s"}, "a type rate names a job type"),
        ({"a\x00b": "1/s"}, "without NUL"),
        ({f"t{n}": "1/s" for n in range(51)}, "at most 50 types of a queue have rates"),
    ):
        with pytest.raises(ValueError, match=says):
            registry.limit("others", type_rates=rates)
    with pytest.raises(ValueError, match="cannot be combined with limits per partition key"):
        registry.limit("others", key_concurrency=2, type_rates={"send_sms": "10/s"})
    assert "others" not in registry.queue_limits


def test_a_claim_says_which_limit_held_it_back_and_when_the_rate_opens() -> None:
    opens = timedelta(seconds=3)
    assert Claimed.within([], 5, Headroom()).held_back == frozenset()
    by_slots = Claimed.within([], 5, Headroom(concurrency=0))
    assert (by_slots.held_back, by_slots.retry_in) == (frozenset({Limit.CONCURRENCY}), None)
    by_rate = Claimed.within([], 5, Headroom(concurrency=4, rate=0, rate_opens_in=opens))
    assert (by_rate.held_back, by_rate.retry_in) == (frozenset({Limit.RATE}), opens)
    # A claim that took all it asked for was held back by nothing, though it spent the
    # rate: the next one waits for the window.
    spent = Claimed.within([], 0, Headroom(rate=0, rate_opens_in=opens))
    assert (spent.held_back, spent.retry_in) == (frozenset(), opens)


def test_a_claim_held_back_by_keys_says_which_of_their_limits_and_when_a_key_opens() -> None:
    opens = timedelta(seconds=3)
    # Every full key was full for its rate: the key rate alone held the claim back, and
    # the first of those keys may start more in `opens`.
    by_key_rate = Claimed.within(
        [], 5, Headroom(keys_full=2, keys_rate_spent=2, key_rate_opens_in=opens)
    )
    assert by_key_rate.held_back == {Limit.KEY_RATE}
    assert (by_key_rate.windows_open_in, by_key_rate.retry_in) == (opens, None)
    # More keys full than spent their rate: the others were full of running jobs.
    both = Claimed.within([], 5, Headroom(keys_full=3, keys_rate_spent=1, key_rate_opens_in=opens))
    assert both.held_back == {Limit.KEY_CONCURRENCY, Limit.KEY_RATE}
    assert both.windows_open_in == opens
    by_slots = Claimed.within([], 5, Headroom(keys_full=2, keys_rate_spent=0))
    assert (by_slots.held_back, by_slots.windows_open_in) == (
        frozenset({Limit.KEY_CONCURRENCY}),
        None,
    )
    # A type's rate held it back: when the first of the keys' and types' windows opens.
    by_type = Claimed.within(
        [],
        5,
        Headroom(
            keys_full=1,
            keys_rate_spent=1,
            key_rate_opens_in=opens,
            types_rate_spent=1,
            type_rate_opens_in=opens / 3,
        ),
    )
    assert by_type.held_back == {Limit.KEY_RATE, Limit.TYPE_RATE}
    assert by_type.windows_open_in == opens / 3
    no_type = Claimed.within([], 5, Headroom(types_rate_spent=0))
    assert (no_type.held_back, no_type.windows_open_in) == (frozenset(), None)
    # A claim that took all it asked for was held back by no key.
    full = Claimed.within([], 0, Headroom(keys_full=2, keys_rate_spent=2, key_rate_opens_in=opens))
    assert (full.held_back, full.windows_open_in) == (frozenset(), None)
