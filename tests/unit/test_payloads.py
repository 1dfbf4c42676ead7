from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict
from uuid import UUID

import msgspec
import pytest

from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.domain.errors import InvalidPayload, is_permanent
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.ports import PayloadDecoder


class Resize(msgspec.Struct, forbid_unknown_fields=True):
    image: UUID
    width: int
    height: int = 100


@dataclass
class Point:
    x: int
    y: int


class Greeting(TypedDict):
    name: str


@pytest.fixture
def decoder() -> PayloadDecoder:
    return MsgspecPayloadDecoder()


def test_converts_a_valid_payload_into_a_struct(decoder: PayloadDecoder) -> None:
    image = "0b4e4c3c-8a53-4c1b-9a3e-0f2f8e1b2c3d"

    resized = decoder.decode("resize", {"image": image, "width": 640}, Resize)

    assert resized == Resize(image=UUID(image), width=640, height=100)


def test_converts_into_dataclasses_and_typed_dicts(decoder: PayloadDecoder) -> None:
    assert decoder.decode("point", {"x": 1, "y": 2}, Point) == Point(1, 2)
    assert decoder.decode("greet", {"name": "Ada"}, Greeting) == {"name": "Ada"}


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        pytest.param(
            {"image": "0b4e4c3c-8a53-4c1b-9a3e-0f2f8e1b2c3d", "width": "640"},
            "Expected `int`, got `str` - at `$.width`",
            id="wrong type",
        ),
        pytest.param(
            {"image": "not-a-uuid", "width": 640}, "Invalid UUID - at `$.image`", id="bad uuid"
        ),
        pytest.param({"width": 640}, "Object missing required field `image`", id="missing field"),
        pytest.param(
            {"image": "0b4e4c3c-8a53-4c1b-9a3e-0f2f8e1b2c3d", "width": 640, "depth": 3},
            "Object contains unknown field `depth`",
            id="unknown field",
        ),
        pytest.param(["640"], "Expected `object`, got `array`", id="not an object"),
    ],
)
def test_refuses_a_payload_that_does_not_fit_with_a_precise_reason(
    decoder: PayloadDecoder, payload: JsonValue, reason: str
) -> None:
    with pytest.raises(InvalidPayload) as raised:
        decoder.decode("resize", payload, Resize)

    assert raised.value.reason == reason
    assert raised.value.job_type == "resize"
    assert str(raised.value) == f"invalid payload for job type 'resize': {reason}"


def test_an_invalid_payload_is_a_permanent_failure(decoder: PayloadDecoder) -> None:
    with pytest.raises(InvalidPayload) as raised:
        decoder.decode("point", {"x": 1}, Point)

    assert is_permanent(raised.value)
