"""The intake's cost per record: ``JournalIntake.ingest`` taking an edge worker's sealed journal periods into a log
store, against converting the same periods to columns alone (the baseline, measured in the same process), for one
source tree or two compared (``--a``, ``--b``).

The journal is made once: ``--periods`` periods of ``--period-records`` records of ``bench/pipeline.py``'s
``edge_records``, committed through ``RequestLog`` as the edge writes them (``bench/journal_answers.py``: ``--clients``
clients, a firewall match every ``--firewall-every`` answers). Each tree is measured in a process of its own (its
``src`` first on ``PYTHONPATH``), one round at a time, the trees in turn and in alternating order round by round; a
round runs both passes, in alternating order too:

- ``conversion``: every period read into columns (the intake's ``period_columns``; at the trees where the log store
  adopted periods as its segments, ``9165121`` to ``5fc1c9a``, kept in git to compare, the module of that name):
  what any intake must do at least;
- ``intake``: a fresh copy of the journal (copied before the clock starts) taken by ``JournalIntake`` into a new
  ``SegmentedLogStore`` beside it, every dataset, as the delivery process does: the columns written again (zstd
  Arrow IPC, ``fsync``); at the trees that adopted periods, each period's file ``fsync``ed and hard-linked instead.

Arrow runs on one thread (as in the delivery process). Figures: CPU of the process (``process_time``) and wall
clock, in microseconds a record, medians over the rounds; the intake's over the conversion's of the same round
(medians of the rounds' ratios); and the store's bytes a record on disk (each file once, however many datasets name
it), against the journal's.

Usage: ``.venv/bin/python bench/intake.py [--a /tmp/base/src] [--b src] [--rounds 5] [--periods 20]
[--period-records 20000]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]


# -- one tree, in its own process ----------------------------------------------------------------------------------


def measure_tree(journal: Path, rounds: int, first: str) -> dict[str, Any]:
    """``rounds`` rounds of both passes over a copy of ``journal``, with the tree on this process's path; ``first``
    is the pass the first round starts with."""
    import pyarrow as pa

    from edgeplane.logs.datasets import DATASETS
    from edgeplane.logs.journal_intake import JournalIntake
    from edgeplane.logs.log_store import SegmentedLogStore
    from edgeplane.logs.request_journal import sealed_periods

    pa.set_cpu_count(1)  # as the delivery process runs Arrow
    pa.set_io_thread_count(1)
    convert = _converter()
    periods = sealed_periods(journal)
    order = ["conversion", "intake"] if first == "conversion" else ["intake", "conversion"]
    passes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="edgeplane-bench-intake-", dir=journal.parent) as scratch:
        for index in range(rounds):
            for kind in order if index % 2 == 0 else reversed(order):
                if kind == "conversion":
                    cpu, wall = time.process_time(), time.perf_counter()
                    records = 0
                    for period in periods:
                        for _dataset, batches in convert(journal, period):
                            records += sum(batch.num_rows for batch in batches)
                    passes.append(_pass(kind, records, cpu, wall))
                    continue
                work = Path(scratch) / f"round-{index}"
                shutil.copytree(journal, work / "journal")
                store = SegmentedLogStore(work / "store", retention_bytes=1 << 50, datasets=DATASETS)
                try:
                    cpu, wall = time.process_time(), time.perf_counter()
                    records = JournalIntake({work / "journal": store}).ingest()
                    result = _pass(kind, records, cpu, wall)
                finally:
                    store.close()
                if sealed_periods(work / "journal"):
                    raise RuntimeError("the intake left periods in the journal")
                result["store_bytes"] = _bytes_on_disk(work / "store")
                passes.append(result)
                shutil.rmtree(work)
    return {"source": _source(), "journal_bytes": _bytes_on_disk(journal), "passes": passes}


def _converter() -> Any:
    """The conversion of a sealed period to columns, as the tree on the path does it: the intake's
    ``period_columns`` (``_parts`` at trees before ``311ce28``), or the module ``period_columns`` at the trees that
    adopted periods (``9165121`` to ``5fc1c9a``)."""
    try:
        from edgeplane.logs.period_columns import period_columns
    except ImportError:
        from edgeplane.logs import journal_intake

        return getattr(journal_intake, "period_columns", None) or journal_intake._parts
    from edgeplane.logs.request_journal import sealed_path

    return lambda directory, period: period_columns(sealed_path(directory, period))


def _pass(kind: str, records: int, cpu_started: float, wall_started: float) -> dict[str, Any]:
    return {
        "kind": kind,
        "records": records,
        "cpu_seconds": time.process_time() - cpu_started,
        "wall_seconds": time.perf_counter() - wall_started,
    }


def _bytes_on_disk(directory: Path) -> int:
    """The size of the files under ``directory`` (segments, periods), each file once however many names it has."""
    seen: dict[tuple[int, int], int] = {}
    for path in directory.rglob("*"):
        if path.is_file() and path.suffix != ".cursor":
            status = path.stat()
            seen[(status.st_dev, status.st_ino)] = status.st_size
    return sum(seen.values())


def _source() -> str:
    import edgeplane

    return str(Path(edgeplane.__file__).resolve().parents[1])


# -- the journal, and the trees in turn ----------------------------------------------------------------------------


def make_journal(directory: Path, args: argparse.Namespace) -> int:
    """Writes the benchmark's journal into ``directory``; returns how many periods it holds."""
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import journal_answers
    import pipeline

    zones = {route.zone_name: route for route in pipeline.snapshot().zones.values()}
    records = pipeline.edge_records(args.periods * args.period_records, args.seed)
    answered = journal_answers.answers(
        records, zones, clients=args.clients, seed=args.seed, firewall_every=args.firewall_every
    )
    return len(journal_answers.write_journal(directory, answered, args.period_records))


def run_tree(source: Path, journal: Path, first: str) -> dict[str, Any]:
    """One round of ``measure_tree`` in a process of its own, ``source`` first on its path."""
    environment = {**os.environ, "PYTHONPATH": str(source.resolve())}
    command = [sys.executable, str(Path(__file__).resolve()), "--measure", str(journal), "--first", first]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{source}: {done.stderr.strip()[-2000:]}")
    document: dict[str, Any] = json.loads(done.stdout)
    if Path(document["source"]) != source.resolve():
        raise RuntimeError(f"measured {document['source']}, not {source}")
    return document


def summary(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of one tree: µs a record of each pass, the intake over the conversion, bytes."""
    passes = [item for document in documents for item in document["passes"]]
    figures: dict[str, Any] = {}
    for kind in ("conversion", "intake"):
        chosen = [item for item in passes if item["kind"] == kind]
        figures[kind] = {
            clock: statistics.median(1e6 * item[f"{clock}_seconds"] / item["records"] for item in chosen)
            for clock in ("cpu", "wall")
        }
        figures[kind]["best_cpu"] = min(1e6 * item["cpu_seconds"] / item["records"] for item in chosen)
    ratios = {clock: [] for clock in ("cpu", "wall")}
    for document in documents:
        by_kind = {item["kind"]: item for item in document["passes"]}
        for clock, values in ratios.items():
            values.append(by_kind["intake"][f"{clock}_seconds"] / by_kind["conversion"][f"{clock}_seconds"])
    figures["intake_over_conversion"] = {clock: statistics.median(values) for clock, values in ratios.items()}
    figures["ratio_range"] = {clock: (min(values), max(values)) for clock, values in ratios.items()}
    records = passes[0]["records"]
    figures["records"] = records
    figures["store_bytes_per_record"] = (
        statistics.median(item["store_bytes"] for item in passes if item["kind"] == "intake") / records
    )
    figures["journal_bytes_per_record"] = documents[0]["journal_bytes"] / records
    return figures


def report(trees: dict[str, dict[str, Any]], periods: int, rounds: int) -> None:
    any_tree = next(iter(trees.values()))
    print(
        f"intake: {any_tree['records']:,} records in {periods} sealed periods; medians of {rounds} rounds"
        " (best CPU in brackets); us a record"
    )
    print(
        f"  {'tree':<4} {'conversion cpu':>16} {'intake cpu':>16} {'wall':>7} {'intake/conv cpu':>16}"
        f" {'(rounds)':>13} {'wall':>5} {'store B/rec':>11} {'journal B/rec':>13}"
    )
    for name, figures in trees.items():
        conversion, intake = figures["conversion"], figures["intake"]
        low, high = figures["ratio_range"]["cpu"]
        print(
            f"  {name:<4} {conversion['cpu']:7.2f} ({conversion['best_cpu']:5.2f})"
            f" {intake['cpu']:7.2f} ({intake['best_cpu']:5.2f}) {intake['wall']:7.2f}"
            f" {figures['intake_over_conversion']['cpu']:16.2f} {f'{low:.2f}-{high:.2f}':>13}"
            f" {figures['intake_over_conversion']['wall']:5.2f}"
            f" {figures['store_bytes_per_record']:11.0f} {figures['journal_bytes_per_record']:13.0f}"
        )
    if len(trees) == 2:
        a, b = trees.values()
        print(
            "  B / A: intake CPU a record {:.2f}, intake over conversion {:.2f}, store bytes a record {:.2f}".format(
                b["intake"]["cpu"] / a["intake"]["cpu"],
                b["intake_over_conversion"]["cpu"] / a["intake_over_conversion"]["cpu"],
                b["store_bytes_per_record"] / a["store_bytes_per_record"],
            )
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--a", type=Path, help="source tree of A (a src directory; the older one)")
    parser.add_argument("--b", type=Path, default=REPO_ROOT / "src", help="source tree of B (default: this one's)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each tree once (default 5)")
    parser.add_argument("--periods", type=int, default=20, help="sealed periods in the journal (default 20)")
    parser.add_argument("--period-records", type=int, default=20_000, help="records a period (default 20,000)")
    parser.add_argument("--clients", type=int, default=20, help="distinct clients; 0: each record its own")
    parser.add_argument("--firewall-every", type=int, default=500, help="a firewall match every N answers")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated records")
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON document")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # a tree's process: this journal
    parser.add_argument("--first", choices=("conversion", "intake"), default="conversion", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 50 or not 1 <= args.periods <= 1000 or not 100 <= args.period_records <= 1_000_000:
        parser.error("--rounds in [1, 50], --periods in [1, 1000], --period-records in [100, 1000000]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.measure is not None:
        print(json.dumps(measure_tree(args.measure, 1, args.first)))
        return 0
    sources = {"A": args.a, "B": args.b} if args.a is not None else {"B": args.b}
    with tempfile.TemporaryDirectory(prefix="edgeplane-bench-intake-") as scratch:
        journal = Path(scratch) / "0.journal"
        print(f"writing {args.periods} periods of {args.period_records:,} records ...", file=sys.stderr)
        periods = make_journal(journal, args)
        documents: dict[str, list[dict[str, Any]]] = {name: [] for name in sources}
        for index in range(args.rounds):
            names = list(sources) if index % 2 == 0 else list(reversed(sources))
            for name in names:
                first = "conversion" if (index // 2) % 2 == 0 else "intake"
                document = run_tree(sources[name], journal, first)
                documents[name].append(document)
                by_kind = {item["kind"]: item for item in document["passes"]}
                print(
                    f"  round {index + 1}/{args.rounds} {name}: conversion"
                    f" {1e6 * by_kind['conversion']['cpu_seconds'] / by_kind['conversion']['records']:.2f} us,"
                    f" intake {1e6 * by_kind['intake']['cpu_seconds'] / by_kind['intake']['records']:.2f} us CPU"
                    " a record",
                    file=sys.stderr,
                )
    trees = {name: summary(found) for name, found in documents.items()}
    for name, source in sources.items():
        print(f"{name}: {source}")
    report(trees, periods, args.rounds)
    if args.json:
        print(json.dumps({"trees": trees, "periods": periods, "documents": documents}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
