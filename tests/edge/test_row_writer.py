"""The request log's C writer (``src/edgeplane/edge/row_writer.c``) against the Python code it stands in for
(``RequestLog.commit_in_python``): whatever the answers, the journal periods hold the same bytes, whichever of the
two wrote each row."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.edge import request_log
from edgeplane.edge.exchange import NOT_LOGGED, Exchange
from edgeplane.edge.http_server import Answer, EdgeRequest, EdgeResponse
from edgeplane.edge.request_log import RequestLog
from edgeplane.logs.request_journal import RequestJournal, sealed_periods
from edgeplane.waf.firewall import Verdict
from tests.edge.test_request_log import probe_match
from tests.edge.test_request_log_flushes import _PLAIN, answer, answers

# What is done to an answer besides its details: nothing (most), or one of the cases the C writer hands over.
CHANGES = st.sampled_from(
    [
        *["none"] * 6,
        *[
            "unstarted",
            "not logged",
            "firewall",
            "no match",
            "huge",
            "float duration",
            "subclass",
            "ray not ASCII",
            "short ray",
            "client as list",
        ],
    ]
)


class _OtherResponse(EdgeResponse):
    """A response of another class: the writer reads its attributes all the same."""


def _changed(one: Answer, change: str) -> Answer:
    request, response, sent_bytes, written_ns = one
    exchange = request.context
    assert isinstance(exchange, Exchange)
    if change == "unstarted":
        exchange.ray_id = ""
    elif change == "not logged":
        request.context = NOT_LOGGED
    elif change == "firewall":
        exchange.verdict = Verdict(matches=(probe_match(),))
    elif change == "no match":
        exchange.verdict = Verdict()  # not ``ALLOWED`` itself: kept whole
    elif change == "huge":
        sent_bytes = 2**64
    elif change == "float duration":
        exchange.origin_duration_ms = 1.5  # type: ignore[assignment]
    elif change == "subclass":
        response = _OtherResponse(response.status, response.body, response.content_type)
    elif change == "ray not ASCII":
        exchange.ray_id = exchange.ray_id[:-1] + "é"  # 17 bytes in UTF-8: kept whole
    elif change == "short ray":
        exchange.ray_id = exchange.ray_id[:8]
    elif change == "client as list":
        request.client = list(request.client) if request.client else None  # type: ignore[assignment]
    return request, response, sent_bytes, written_ns


def _started(request: EdgeRequest, written_ns: int) -> Exchange:
    """The router's ``_start``, as far as the journal shows it."""
    exchange = Exchange("late.example.com", None)
    exchange.ray_id = "%016x" % (written_ns % 2**64)
    exchange.started_ns = written_ns
    request.context = exchange
    return exchange


def _journalled(
    periods: list[list[Answer]], *, native: bool, period_bytes: int = 1 << 20, max_rows: int = 8192
) -> list[bytes]:
    """The sealed periods' bytes after committing each list of answers in a period of its own (or more, when
    ``period_bytes`` or ``max_rows`` end it sooner)."""
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as directory:
        if not native:
            patch.setattr(request_log, "row_writer", None)
        log = RequestLog(RequestJournal(Path(directory), period_bytes=period_bytes), max_rows=max_rows)
        log.start = _started
        assert (log._writer is not None) == native
        for period in periods:
            for request, response, sent_bytes, written_ns in period:
                log.commit(request, response, sent_bytes, written_ns)
            log.seal()
        found = [(Path(directory) / f"{period:016d}.sealed").read_bytes() for period in sealed_periods(Path(directory))]
        log.close()
        return found


def test_the_row_writer_is_compiled() -> None:
    """``scripts/bootstrap dev`` installs a C compiler: the C module is what these tests compare."""
    assert request_log.row_writer is not None, "edgeplane.edge.row_writer was not built (no C compiler?)"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(answers, CHANGES), max_size=10), min_size=1, max_size=3))
def test_the_c_writer_journals_the_bytes_the_python_code_does(periods: list[list[tuple[dict[str, str], str]]]) -> None:
    def make() -> list[list[Answer]]:
        made: list[list[Answer]] = []
        number = 0
        for period in periods:
            made.append([])
            for details, change in period:
                made[-1].append(_changed(answer(number, details), change))
                number += 1
        return made

    assert _journalled(make(), native=True) == _journalled(make(), native=False)
    # Past ``max_rows``, every row goes the Python way, which asks for the seal (on the loop's next turn).
    assert _journalled(make(), native=True, max_rows=2) == _journalled(make(), native=False, max_rows=2)


def test_a_thousand_rows_and_a_full_period_give_the_python_codes_bytes() -> None:
    """Rows of five shapes, in periods too small for them: the C writer seals and opens as the Python code does."""

    def made() -> list[list[Answer]]:
        return [[answer(number, {**_PLAIN, "query": b"n=%d" % (number % 5)}) for number in range(1000)]]

    native = _journalled(made(), native=True, period_bytes=16 << 10)
    assert native == _journalled(made(), native=False, period_bytes=16 << 10)
    assert len(native) > 5  # 104 bytes a row: about 150 rows a period


def test_rows_beyond_the_zeros_written_ahead_give_the_python_codes_bytes() -> None:
    """Six thousand rows in one period: the journal writes zeros ahead twice while they are written."""

    def made() -> list[list[Answer]]:
        return [[answer(number, _PLAIN) for number in range(6000)]]

    native = _journalled(made(), native=True)
    assert native == _journalled(made(), native=False)
    assert len(native) == 1


def test_rows_of_the_same_texts_share_a_shape_whichever_row_came_before() -> None:
    one = {**_PLAIN, "query": b"a=1"}
    two = {**_PLAIN, "query": b"b=2"}
    made = [answer(number, details) for number, details in enumerate([one, one, two, one, two])]
    (native,) = _journalled([made], native=True)
    assert native.count(b"a=1") == native.count(b"b=2") == 1  # each shape's frame once


def test_the_writer_lets_go_of_the_mapping_when_the_period_is_sealed(tmp_path: Path) -> None:
    log = RequestLog(RequestJournal(tmp_path))
    writer = log._writer
    assert writer is not None
    log.commit(*answer(0, _PLAIN))
    log.commit(*answer(1, _PLAIN))
    assert writer.attached
    log.seal()  # closes the mapping: it would raise while the writer held it
    assert not writer.attached
    with pytest.raises(ValueError, match="attached"):
        writer.end = 8
    log.close()
