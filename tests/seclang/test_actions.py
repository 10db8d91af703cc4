"""Properties of macro expansion and setvar arithmetic, whatever the text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from edgeplane.seclang.actions import Macro, SetVar, modsecurity_integer


class Context:
    def __init__(self, values: dict[tuple[str, str | None], bytes]) -> None:
        self.values = values

    def macro_value(self, collection: str, key: str | None) -> bytes:
        return self.values.get((collection, key), b"")


@given(st.text().filter(lambda text: "%{" not in text))
def test_text_without_references_expands_to_itself(text: str) -> None:
    assert Macro.parse(text).expand(Context({})) == text.encode("utf-8")


@given(st.text(alphabet="abc {}.", max_size=30), st.binary(max_size=5))
def test_references_expand_to_their_values(text: str, value: bytes) -> None:
    macro = Macro.parse(text + "%{tx.a}" + text)
    expected_side = Macro.parse(text).expand(Context({("TX", "a"): value}))
    assert macro.expand(Context({("TX", "a"): value})) == expected_side + value + expected_side


@given(st.integers(-(10**9), 10**9), st.integers(-(10**6), 10**6))
def test_add_then_subtract_restores(start: int, step: int) -> None:
    collections: dict[str, dict[str, bytes]] = {"TX": {"v": str(start).encode()}}
    context = Context({})
    SetVar("TX", Macro.parse("v"), "add", Macro.parse(str(step))).apply(collections, context)
    assert modsecurity_integer(collections["TX"]["v"]) == start + step
    SetVar("TX", Macro.parse("v"), "subtract", Macro.parse(str(step))).apply(collections, context)
    assert collections["TX"]["v"] == str(start).encode()


@given(st.binary(max_size=12))
def test_integer_prefix_never_raises(value: bytes) -> None:
    assert isinstance(modsecurity_integer(value), int)
