"""The bounded memo gives the function's own results, one object per remembered value, and never grows past its
bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from edgeplane.bounded_memo import BoundedMemo


@given(st.lists(st.binary(max_size=12), max_size=200))
def test_answers_are_the_function_s_and_the_memo_stays_bounded(values: list[bytes]) -> None:
    calls: list[bytes] = []

    def decode(value: bytes) -> str:
        calls.append(value)
        return value.decode("latin-1").upper()

    memo = BoundedMemo(decode, max_entries=8, max_length=10)
    for value in values:
        assert memo(value) == value.decode("latin-1").upper()
        assert len(memo) <= 8
    assert len(calls) <= len(values)


def test_a_remembered_value_gives_the_same_object_and_a_long_one_is_not_remembered() -> None:
    memo = BoundedMemo(lambda value: value.decode(), max_length=4)
    assert memo(b"POST") is memo(b"POST")
    memo(b"longer than four")
    assert len(memo) == 1


def test_a_full_memo_starts_again() -> None:
    memo = BoundedMemo(lambda value: value * 2, max_entries=3)
    for value in (1, 2, 3):
        memo(value)
    assert len(memo) == 3
    assert memo(4) == 8
    assert len(memo) == 1
