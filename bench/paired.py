"""Two versions of edgeplane compared under the same load at the same time: CPU per request, paired.

Starts anvil and two ``edgeplane serve --edge-workers 1`` processes (``--edge-workers`` for more), A and B, each
running the source tree given (``--a``/``--b``, a ``src`` directory put first on ``PYTHONPATH``) and each with an
optional ``edgeplane.toml`` (``--config-a``/``--config-b``). Both edgeplane processes are pinned to the last CPU,
anvil and the load generator to the others, and every round loads A and B at once
(``bench/gateway.measure(together=True)``) with a mix of ``eth_chainId`` and ``eth_blockNumber``, so whatever slows
the machine during a round slows both alike. Each round prints A's and B's requests per second, p50 and CPU per
request; the medians over the rounds are the figures. Run it with the same tree on both sides first: the difference
it shows then is the harness's own noise.

``--phase-a``/``--phase-b PHASE=FILE`` deploys a phase's entrypoint rules (a JSON list, as the Rulesets API takes
them) in that side's zone before the load: a side with rules against one without measures what the rules cost at
the edge (``bench/ratelimit_rules.json``: rate limiting rules every request of every worker counts in).

Usage: ``.venv/bin/python bench/paired.py --a /path/to/old/src --b src [--rounds 4] [--concurrency 16]
[--phase-b http_ratelimit=bench/ratelimit_rules.json]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BODIES = (
    b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
    b'{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]}',
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, required=True, help="source tree of A (a src directory)")
    parser.add_argument("--b", type=Path, required=True, help="source tree of B (a src directory)")
    parser.add_argument("--config-a", help="edgeplane.toml text for A")
    parser.add_argument("--config-b", help="edgeplane.toml text for B")
    for side in ("a", "b"):
        parser.add_argument(
            f"--phase-{side}",
            action="append",
            default=[],
            metavar="PHASE=FILE",
            help=f"deploy the rules of FILE (a JSON list) in {side.upper()}'s zone entrypoint of PHASE",
        )
    parser.add_argument("--rounds", type=int, default=4, help="load rounds (default 4)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per round (default 3)")
    parser.add_argument("--concurrency", type=int, default=16, help="connections per side (default 16)")
    parser.add_argument(
        "--edge-workers", type=int, default=1, help="edge worker processes per side (default 1; all on the same CPU)"
    )
    args = parser.parse_args(argv)
    for tree in (args.a, args.b):
        if not (tree / "edgeplane").is_dir():
            parser.error(f"{tree} is not a src directory holding edgeplane")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "bench")]
    import gateway as load  # bench/gateway.py: the load generator and its measure loop
    from tests.support.anvil import AnvilNode
    from tests.support.edgeplane import EdgeplaneProcess

    cpus = os.cpu_count() or 1
    edge_cpu, other_cpus = {cpus - 1}, set(range(cpus - 1)) or {0}
    results: dict[str, list[tuple[float, float, float, float]]] = {"A": [], "B": []}
    with contextlib.ExitStack() as stack:
        os.sched_setaffinity(0, other_cpus)
        node = stack.enter_context(AnvilNode())
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="edgeplane-paired-")))
        servers = {}
        os.sched_setaffinity(0, edge_cpu)  # inherited by the edgeplane processes
        for name, tree, config in (("A", args.a, args.config_a), ("B", args.b, args.config_b)):
            data = scratch / name
            if config:
                data.mkdir()
                (data / "edgeplane.toml").write_text(config)
            os.environ["PYTHONPATH"] = str(tree.resolve())
            extra = ("--log-level", "warning", "--edge-workers", str(args.edge_workers))
            servers[name] = stack.enter_context(
                EdgeplaneProcess(data, upstreams=(f"mainnet={node.url}",), extra_args=extra)
            )
        os.environ.pop("PYTHONPATH")
        os.sched_setaffinity(0, other_cpus)
        for name, phases in (("A", args.phase_a), ("B", args.phase_b)):
            for given in phases:
                phase, _sep, path = given.partition("=")
                rules = json.loads(Path(path).read_text())
                servers[name].v4("PUT", f"/zones/{{zone}}/rulesets/phases/{phase}/entrypoint", json={"rules": rules})
        urls = {name: server.rpc_url("mainnet") for name, server in servers.items()}
        time.sleep(3)  # past start-up: the delivery process and the chain finish importing
        pids: dict[str, load.Pids] = {}
        for name, server in servers.items():
            pids[name] = load.edge_pids(server.pid)
            # The delivery process, counted apart: on this CPU too, it takes the edge's records.
            pids[f"{name} child"] = load.role_pids(server.pid, "delivery")
        for number in range(1, args.rounds + 1):
            summary = load.measure(
                urls,
                BODIES,
                pids,
                concurrency=args.concurrency,
                rounds=1,
                seconds=args.seconds,
                warmup_seconds=0.3,
                client="raw",
                progress=False,
                together=True,
            )
            for name in ("A", "B"):
                side = summary[name]
                cpu_per_request = side.cpu_percent[name] * 1e4 / side.requests_per_second
                child_per_request = side.cpu_percent.get(f"{name} child", 0.0) * 1e4 / side.requests_per_second
                results[name].append((side.requests_per_second, side.p50_ms, cpu_per_request, child_per_request))
            stolen = summary["A"].cpu_percent.get("stolen", 0.0)  # the host's share of the round (a whole core: 100)
            print(
                f"round {number}: "
                + "  ".join(f"{name} {results[name][-1][2]:.1f} us/request" for name in ("A", "B"))
                + f"  (stolen {stolen:.0f} %)",
                file=sys.stderr,
            )
    for name in ("A", "B"):
        rows = results[name]
        rate, p50, cpu, child = (statistics.median(row[column] for row in rows) for column in range(4))
        each = ", ".join(f"{row[2]:.1f}" for row in rows)
        print(
            f"{name}: {rate:8.0f} req/s  p50 {p50:.3f} ms  CPU {cpu:.1f} us/request (rounds: {each})"
            f"  delivery process {child:.1f} us/request"
        )
    # The rounds load A and B at once, so a round's B-A difference is the figure least moved by the machine.
    differences = sorted(b[2] - a[2] for a, b in zip(results["A"], results["B"], strict=True))
    low, high = differences[0], differences[-1]
    print(f"B-A: median {statistics.median(differences):+.1f} us/request (rounds from {low:+.1f} to {high:+.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
