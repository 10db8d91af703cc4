"""The request log's row on its own: ``RequestLog.commit`` of ordinary answers into a journal period, the C module
(``edge/row_writer.c``) against the Python code it stands in for (``commit_in_python``), in the same run.

Makes ``--answers`` answers of one shape (as the edge's are under a benchmark's load: one client, one method), then
commits them all, ``--rounds`` times each way in turn, each round into a fresh period (its file written with zeros
ahead, as the edge's are). ``hot``: the same answer over and over (its objects in the cache); ``cold``: every answer
its own objects, more than the cache holds. Prints nanoseconds a row and the Python code's time over the C
module's.

Usage: ``.venv/bin/python bench/row_commit.py [--answers 20000] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from edgeplane.configuration.snapshot import ZoneRoute
from edgeplane.edge import request_log
from edgeplane.edge.exchange import Exchange, new_ray_id
from edgeplane.edge.http_server import Answer, EdgeRequest, EdgeResponse
from edgeplane.edge.request_log import RequestLog
from edgeplane.logs.request_journal import RequestJournal

ZONE = ZoneRoute(zone_id="z" * 32, zone_name="localhost", account_id="a" * 32, plan="enterprise")
CLIENT = ("127.0.0.1", 40000)
SERVER = ("127.0.0.1", 8080)


def answer(number: int) -> Answer:
    request = EdgeRequest(
        method="POST",
        path="/v1/mainnet",
        query_string=b"",
        headers=[(b"host", b"localhost"), (b"user-agent", b"bench")],
        http_version="1.1",
        client=CLIENT,
        server=SERVER,
        content_length=60,
    )
    exchange = Exchange("localhost", ZONE)
    exchange.ray_id = new_ray_id()
    exchange.started_ns = time.time_ns()
    exchange.origin_status, exchange.origin_duration_ms = 200, 1
    request.context = exchange
    response = EdgeResponse(200, b'{"jsonrpc":"2.0","id":1,"result":"0x1"}')
    return request, response, 120, exchange.started_ns + 100_000 + number


def per_row(log: RequestLog, answers: list[Answer]) -> float:
    log.seal()
    started = time.perf_counter_ns()
    commit = log.commit
    for request, response, sent_bytes, written_ns in answers:
        commit(request, response, sent_bytes, written_ns)
    return (time.perf_counter_ns() - started) / len(answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if request_log.row_writer is None:
        raise SystemExit("edgeplane.edge.row_writer is not built: run scripts/bootstrap")
    cold = [answer(number) for number in range(args.answers)]
    hot = [cold[0]] * args.answers
    with tempfile.TemporaryDirectory() as c_directory, tempfile.TemporaryDirectory() as python_directory:
        in_c = RequestLog(RequestJournal(Path(c_directory)), max_rows=args.answers + 1)
        module, request_log.row_writer = request_log.row_writer, None  # the Python code alone, as without the module
        try:
            in_python = RequestLog(RequestJournal(Path(python_directory)), max_rows=args.answers + 1)
        finally:
            request_log.row_writer = module
        for name, answers in (("hot", hot), ("cold", cold)):
            c_times, python_times = [], []
            for _round in range(args.rounds):
                c_times.append(per_row(in_c, answers))
                python_times.append(per_row(in_python, answers))
            c_row, python_row = statistics.median(c_times), statistics.median(python_times)
            print(
                f"{name:>4}: C {c_row:6.0f} ns a row, Python {python_row:6.0f} ns a row,"
                f" Python / C {python_row / c_row:.2f}"
            )
        in_c.close()
        in_python.close()


if __name__ == "__main__":
    main()
