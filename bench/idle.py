"""What an idle ``edgeplane serve`` costs: the CPU of its whole process tree while nothing is asked of it.

Starts ``edgeplane serve`` on a temporary data directory and free loopback ports (by default with the embedded
development chain, so the tree is supervisor, API, edge workers, delivery and chain), waits until the API and the edge
answer ``/healthz``, lets the start settle, then samples the CPU time (user + system, from ``/proc/<pid>/stat``) of the
supervisor and every descendant over the measuring window, and prints it as a percentage of one core, in total and
per process. The target (issue 22) is under 1 % of a core in total.

Usage: ``.venv/bin/python bench/idle.py [--seconds 25] [--settle 5] [--edge-workers 2] [--upstream NET=URL]
[--logpush-job] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from ``/proc/<pid>/task/*/children``."""
    found = [pid]
    index = 0
    while index < len(found):
        current = found[index]
        index += 1
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
            except OSError:
                continue
            found.extend(int(child) for child in children if int(child) not in found)
    return found


def _cpu_ticks(pid: int) -> int | None:
    """User + system clock ticks of ``pid`` (all its threads), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the whole line)


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


def _v4(api: str, token: str, method: str, path: str, body: dict[str, object]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{api}/client/v4{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer["result"]  # type: ignore[no-any-return]


def _add_logpush_job(api: str, data_dir: Path) -> None:
    """An enabled http_requests job to a file destination under the data directory (the default file root)."""
    credentials = json.loads((data_dir / "credentials.json").read_text())
    token, scope = credentials["api_token"], f"/zones/{credentials['zone_id']}/logpush"
    conf = f"file://{data_dir / 'destinations'}/idle"
    written = _v4(api, token, "POST", f"{scope}/ownership", {"destination_conf": conf})
    challenge = Path(written["filename"]).read_text().strip()
    job = {"dataset": "http_requests", "destination_conf": conf, "ownership_challenge": challenge, "enabled": True}
    _v4(api, token, "POST", f"{scope}/jobs", {"name": "idle", **job})


def measure(
    seconds: float, settle: float, edge_workers: int, upstreams: list[str], *, logpush_job: bool = False
) -> dict[str, object]:
    """Starts the service (with ``logpush_job``, with an enabled Logpush job), measures its idle CPU over
    ``seconds`` after ``settle``; the figures as a dict."""
    with tempfile.TemporaryDirectory(prefix="edgeplane-idle-") as root:
        data_dir = Path(root) / "data"
        edge_port, api_port = _free_port(), _free_port()
        command = [
            sys.executable,
            "-m",
            "edgeplane",
            "serve",
            "--data-dir",
            str(data_dir),
            "--edge-port",
            str(edge_port),
            "--api-port",
            str(api_port),
            "--edge-workers",
            str(edge_workers),
            "--log-format",
            "json",
            *[argument for upstream in upstreams for argument in ("--upstream", upstream)],
        ]
        env = {key: value for key, value in os.environ.items() if not key.startswith("EDGEPLANE_")}
        with (Path(root) / "serve.log").open("wb") as log_file:
            process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)
            try:
                deadline = time.monotonic() + 120
                while not (_healthy(f"http://127.0.0.1:{api_port}") and _healthy(f"http://127.0.0.1:{edge_port}")):
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"edgeplane did not start: {(Path(root) / 'serve.log').read_text()[-3000:]}")
                    time.sleep(0.2)
                if logpush_job:
                    _add_logpush_job(f"http://127.0.0.1:{api_port}", data_dir)
                time.sleep(settle)
                pids = _descendants(process.pid)
                before = {pid: _cpu_ticks(pid) for pid in pids}
                started = time.monotonic()
                time.sleep(seconds)
                elapsed = time.monotonic() - started
                after = {pid: _cpu_ticks(pid) for pid in pids}
                processes = {}
                for pid in pids:
                    first, last = before[pid], after[pid]
                    if first is None or last is None:
                        continue
                    processes[f"{_role(pid)} ({pid})"] = 100.0 * (last - first) / CLOCK_TICKS / elapsed
            finally:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
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
