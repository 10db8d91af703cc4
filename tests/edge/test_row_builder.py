"""The request log's C row builder (``src/edgeplane/edge/row_builder.c``) against the Python loop it stands in for:
whatever the answers, the rows of a period give the same records, and the answers it leaves are those the loop
keeps whole or has started."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.edge import request_rows
from edgeplane.edge.exchange import NOT_LOGGED, Exchange
from edgeplane.edge.http_server import Answer, EdgeResponse
from edgeplane.edge.request_rows import RequestRows
from edgeplane.waf.firewall import Verdict
from tests.edge.test_request_log_flushes import _PLAIN, answer, answers

# What is done to an answer besides its details: nothing (most), or one of the cases the Python loop takes.
CHANGES = st.sampled_from(
    [
        *["none"] * 4,
        *["unstarted", "not logged", "firewall", "no match", "huge", "subclass", "ray with separator", "ray not ASCII"],
    ]
)


class _OtherResponse(EdgeResponse):
    """A response of another class: the builder reads only the classes it was set up with."""


def _changed(one: Answer, change: str) -> Answer:
    request, response, sent_bytes, written_ns = one
    exchange = request.context
    assert isinstance(exchange, Exchange)
    if change == "unstarted":
        exchange.ray_id = ""
    elif change == "not logged":
        request.context = NOT_LOGGED
    elif change == "firewall":
        exchange.verdict = Verdict(matches=({"rule_id": "r1"},))  # type: ignore[arg-type]
    elif change == "no match":
        exchange.verdict = Verdict()  # not ``ALLOWED`` itself, but nothing matched: an ordinary row
    elif change == "huge":
        sent_bytes = 2**64
    elif change == "subclass":
        response = _OtherResponse(response.status, response.body, response.content_type)
    elif change == "ray with separator":
        exchange.ray_id += "\n"  # kept whole: the journal separates ray ids with newlines
    elif change == "ray not ASCII":
        exchange.ray_id += "é"  # not the C module's: the Python loop journals it as UTF-8
    return request, response, sent_bytes, written_ns


def _built(batches: list[list[Answer]], *, native: bool) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """The records of the rows added (by ray id) and, per batch, the positions of the answers left over."""
    with pytest.MonkeyPatch.context() as patch:
        if not native:
            patch.setattr(request_rows, "row_builder", None)
        rows = RequestRows()
        left: list[list[int]] = []
        for batch in batches:
            leftovers, unstarted = rows.add_answers(batch)
            position = {id(one[0]): index for index, one in enumerate(batch)}
            left.append([*sorted(position[id(item[0][0])] for item in leftovers), -1])
            left[-1] += sorted(position[id(one[0])] for one in unstarted)
        return sorted(rows.records(), key=lambda record: str(record["RayID"])), left


def test_the_row_builder_is_compiled() -> None:
    """``scripts/bootstrap dev`` installs a C compiler: the C module is what these tests compare."""
    assert request_rows.row_builder is not None  # type: ignore[attr-defined], "edgeplane.edge.row_builder was not built (no C compiler?)"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(answers, CHANGES), max_size=8), min_size=1, max_size=4))
def test_the_row_builder_adds_the_rows_the_python_loop_adds(batches: list[list[tuple[dict[str, Any], str]]]) -> None:
    def make() -> list[list[Answer]]:
        made: list[list[Answer]] = []
        number = 0
        for batch in batches:
            made.append([])
            for details, change in batch:
                made[-1].append(_changed(answer(number, details), change))
                number += 1
        return made

    assert _built(make(), native=True) == _built(make(), native=False)


def test_a_row_like_the_one_before_reuses_its_shape() -> None:
    """Rows of the same texts share a shape, whether the one before them was theirs or not."""
    one = {**_PLAIN, "query": b"a=1"}
    two = {**_PLAIN, "query": b"b=2"}
    rows = RequestRows()
    rows.add_answers([answer(0, one), answer(1, one), answer(2, two), answer(3, one)])
    rows.add_answers([answer(4, two)])
    chunk = rows.take_chunk()
    assert chunk is not None
    assert len(chunk.shapes) == 2
    assert list(memoryview(chunk.shape_numbers).cast("I")) == [0, 0, 1, 0, 1]
    rows.add_answers([answer(5, one)])  # the next chunk names the shape the last one introduced
    later = rows.take_chunk()
    assert later is not None
    assert later.shapes == []
    assert list(memoryview(later.shape_numbers).cast("I")) == [0]


def test_a_thousand_rows_give_the_python_loops_chunk() -> None:
    """Past the byte arrays' first allocations (4 KiB, then doubled): the same bytes as the Python loop's."""

    def chunk(*, native: bool) -> request_rows.Chunk:
        with pytest.MonkeyPatch.context() as patch:
            if not native:
                patch.setattr(request_rows, "row_builder", None)
            rows = RequestRows()
            made = [answer(number, {**_PLAIN, "query": b"n=%d" % (number % 5)}) for number in range(1000)]
            for start in range(0, len(made), 64):
                assert rows.add_answers(made[start : start + 64]) == ([], [])
            taken = rows.take_chunk()
            assert taken is not None
            return taken

    native, python = chunk(native=True), chunk(native=False)
    assert native.count == python.count == 1000
    assert len(native.shapes) == len(python.shapes) == 5
    assert (bytes(native.shape_numbers), native.rays) == (bytes(python.shape_numbers), python.rays)
    assert native.rays.count("\n") == 1000
    assert bytes(native.numbers) == bytes(python.numbers)
    assert len(native.numbers) == 1000 * 9 * 8
