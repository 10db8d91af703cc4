"""What an idle ``edgeplane serve`` costs: the CPU of its whole process tree while nothing is asked of it.

Starts ``edgeplane serve`` as the end-to-end tests do (``tests.support.edgeplane.EdgeplaneProcess``: a temporary data
directory, free loopback ports; by default with the embedded development chain, so the tree is supervisor, API, edge
workers, delivery and chain), which waits until the API and every edge worker answer ``/healthz``; lets the start
settle, then samples the CPU time (user + system, from ``/proc/<pid>/stat``) of the supervisor and every descendant
over the measuring window, and prints it as a percentage of one core, in total and per process. The target (issue
22) is under 1 % of a core in total.

Usage: ``.venv/bin/python bench/idle.py [--seconds 25] [--settle 5] [--edge-workers 2] [--upstream NET=URL]
[--logpush-job] [--json]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

if __package__:  # python -m bench.idle
    from bench.gateway import REPO_ROOT, _process_cpu_seconds
else:  # python bench/idle.py: this file's directory is on sys.path
    from gateway import REPO_ROOT, _process_cpu_seconds

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.edgeplane import EdgeplaneProcess  # after the path set-up


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from ``/proc/<pid>/task/*/children``."""
    found = [pid]
    index = 0
    while index < len(found):
        current = found[index]
        index += 1
        try:
            tasks = Path(f"/proc/{current}/task").iterdir()
            children = [int(child) for task in tasks for child in (task / "children").read_text().split()]
        except OSError:
            continue
        found.extend(child for child in children if child not in found)
    return found


def _role(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    if "edgeplane" in argv and argv.index("edgeplane") + 1 < len(argv):
        role = argv[argv.index("edgeplane") + 1]
        if role == "edge-worker" and "--worker" in argv:
            return f"edge-worker-{argv[argv.index('--worker') + 1]}"
        return role
    return Path(argv[0]).name if argv and argv[0] else "?"


def measure(
    seconds: float, settle: float, edge_workers: int, upstreams: list[str], *, logpush_job: bool = False
) -> dict[str, object]:
    """Starts the service (with ``logpush_job``, with an enabled Logpush job), measures its idle CPU over
    ``seconds`` after ``settle``; the figures as a dict."""
    with tempfile.TemporaryDirectory(prefix="edgeplane-idle-") as root:
        service = EdgeplaneProcess(
            Path(root) / "data", upstreams=tuple(upstreams), extra_args=("--edge-workers", str(edge_workers))
        )
        service.start(timeout=120)
        try:
            if logpush_job:  # an http_requests job to a file destination under the default file root
                job = {"name": "idle", "dataset": "http_requests", "enabled": True, **service.file_destination("idle")}
                service.v4("POST", "/zones/{zone}/logpush/jobs", json=job)
            time.sleep(settle)
            pids = _descendants(service.pid)
            before = {pid: _process_cpu_seconds(pid) for pid in pids}
            started = time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - started
            after = {pid: _process_cpu_seconds(pid) for pid in pids}
            processes = {}
            for pid in pids:
                first, last = before[pid], after[pid]
                if first is not None and last is not None:
                    processes[f"{_role(pid)} ({pid})"] = 100.0 * (last - first) / elapsed
        finally:
            service.stop()
    return {
        "seconds": round(elapsed, 1),
        "edge_workers": edge_workers,
        "logpush_job": logpush_job,
        "total_percent_of_a_core": round(sum(processes.values()), 2),
        "processes": {name: round(share, 2) for name, share in processes.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=25.0, help="measuring window")
    parser.add_argument("--settle", type=float, default=5.0, help="wait after the service is ready")
    parser.add_argument("--edge-workers", type=int, default=2)
    parser.add_argument("--upstream", action="append", default=[], help="NETWORK=URL (default: the dev chain)")
    parser.add_argument("--logpush-job", action="store_true", help="with an enabled Logpush job (no traffic)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args()
    figures = measure(
        arguments.seconds,
        arguments.settle,
        arguments.edge_workers,
        arguments.upstream,
        logpush_job=arguments.logpush_job,
    )
    if arguments.json:
        print(json.dumps(figures, indent=2))
        return
    job = ", an enabled Logpush job" if figures["logpush_job"] else ""
    print(f"idle over {figures['seconds']} s, {figures['edge_workers']} edge workers{job}")
    processes = figures["processes"]
    assert isinstance(processes, dict)
    for name, share in processes.items():
        print(f"  {name:<28} {share:6.2f} % of a core")
    print(f"  {'total':<28} {figures['total_percent_of_a_core']:6.2f} % of a core (target: under 1 %)")


if __name__ == "__main__":
    main()
