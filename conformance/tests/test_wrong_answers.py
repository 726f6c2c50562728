"""The rewrite the wrong-answer checks make: a string swapped wherever a store's operation holds it."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from chronica_conformance.wrong_answers import ask_for_another


@dataclasses.dataclass(frozen=True)
class Statement:
    text: str
    parameters: dict[str, str]
    shout: str = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shout", self.text.upper())


class Call(NamedTuple):
    method: str
    arguments: tuple[object, ...]


def test_the_asked_string_is_swapped_inside_containers_and_dataclasses() -> None:
    swap = ask_for_another("mine", "theirs")
    operation = Call("get", (Statement("mine", {"id": "mine", "kind": "message"}), ["mine", 3]))
    swapped = swap(operation)
    assert swapped == Call("get", (Statement("theirs", {"id": "theirs", "kind": "message"}), ["theirs", 3]))
    assert operation.arguments[0] == Statement("mine", {"id": "mine", "kind": "message"})  # not changed


def test_a_dataclass_field_its_constructor_does_not_take_is_derived_again() -> None:
    swapped = ask_for_another("mine", "theirs")(Statement("mine", {}))
    assert (swapped.text, swapped.shout) == ("theirs", "THEIRS")
