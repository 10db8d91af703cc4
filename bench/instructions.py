"""Instructions per request of the edge process, counted by callgrind: deterministic, whatever else the machine does.

Starts anvil and ``edgeplane serve --edge-workers 1 --upstream mainnet=<anvil>`` under ``valgrind --tool=callgrind``
with its children traced but for the API and the delivery process (the supervisor, idle, and the edge worker run
under callgrind), sends a warm-up of ``eth_chainId`` requests, zeroes the edge worker's counters, sends
``--requests`` more at concurrency 16 on keep-alive connections, waits for the edge's timers, dumps the edge
worker's counters and prints their total divided by the requests. Run it with logs on and with ``--logs-off`` (or on
two source trees, ``--src``) and compare.

Under valgrind the edge runs some fifty times slower, so its timers (the 1 s journal periods, the log store's
intervals) would cover far fewer requests than at full speed. The benchmark therefore runs a copy of the source tree
with those constants multiplied by ``--stretch`` (60: 50 ms becomes 3 s, 1 s a minute) and waits ``--wait`` seconds
after the load, so that batches and periods hold what they hold at full speed and their fixed costs are counted as
often. A tree whose constants are not where this script looks is refused, not measured wrong.

Usage: ``.venv/bin/python bench/instructions.py [--src src] [--logs-off] [--requests 15000]`` (about 6 minutes;
valgrind from Debian's ``valgrind`` package).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BODY = b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'
REQUEST = (
    b"POST /v1/mainnet HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\n"
    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)
) + BODY
CONCURRENCY = 16
WARMUP_REQUESTS = 800
# The timing constants stretched in the copy: (file under src/edgeplane, pattern of the number).
STRETCHED = (
    ("edge/request_log.py", r"seal_interval: float = ([0-9.]+),"),
    ("logs/log_store.py", r"flush_interval: float = ([0-9.]+),"),
    ("logs/log_store.py", r"sync_interval: float = ([0-9.]+),"),
)


def stretched_copy(src: Path, into: Path, factor: float) -> Path:
    """A copy of ``src`` with the timing constants multiplied by ``factor``; raises when one is not found."""
    tree = into / "src"
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns("__pycache__"))
    for relative, pattern in STRETCHED:
        path = tree / "edgeplane" / relative
        text = path.read_text()
        match = re.search(pattern, text, re.MULTILINE)
        if match is None:
            raise SystemExit(f"{relative}: no constant matches {pattern!r}; update STRETCHED")
        value = float(match.group(1)) * factor
        text = text[: match.start(1)] + repr(value) + text[match.end(1) :]
        path.write_text(text)
    return tree


async def _client(port: int, count: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(count):
        writer.write(REQUEST)
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: (\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
    writer.close()


def load(port: int, total: int) -> None:
    async def run() -> None:
        await asyncio.gather(*(_client(port, total // CONCURRENCY) for _ in range(CONCURRENCY)))

    asyncio.run(run())


def wait_until_answering(port: int, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/mainnet", data=BODY, headers={"Content-Type": "application/json"}
    )
    while True:
        try:
            with urllib.request.urlopen(request, timeout=60):  # loopback, our own server
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("edgeplane did not start under valgrind") from None
            time.sleep(2)


def edge_worker_pid(serve_pid: int) -> int:
    """The edge worker that ``edgeplane serve`` (``serve_pid``) started: its child with ``edge-worker`` among its
    arguments (under valgrind, the tool's own come first)."""
    children = Path(f"/proc/{serve_pid}/task/{serve_pid}/children").read_text().split()
    for child in children:
        with contextlib.suppress(OSError):
            if b"edge-worker" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0"):
                return int(child)
    raise SystemExit("edgeplane serve started no edge worker")


def measure(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO_ROOT))
    from tests.support.anvil import AnvilNode, free_port

    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed (Debian package valgrind)")
    with AnvilNode() as node, tempfile.TemporaryDirectory(prefix="edgeplane-instructions-") as scratch:
        root = Path(scratch)
        tree = stretched_copy(args.src.resolve(), root, args.stretch)
        data = root / "data"
        data.mkdir()
        if args.logs_off:
            (data / "edgeplane.toml").write_text("[logs]\nenabled = false\n")
        edge_port, api_port = free_port(), free_port()
        out = root / "callgrind.out"
        command = [
            *("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p"),
            *("--trace-children=yes", "--trace-children-skip-by-arg=api,delivery"),
            *(sys.executable, "-m", "edgeplane", "serve", "--data-dir", str(data), "--log-level", "warning"),
            *("--edge-port", str(edge_port), "--api-port", str(api_port), "--edge-workers", "1"),
            *("--upstream", f"mainnet={node.url}"),
        ]
        environment = dict(os.environ, PYTHONPATH=str(tree))
        with (root / "valgrind.log").open("wb") as valgrind_log:
            process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=valgrind_log)
            try:
                wait_until_answering(edge_port, process, 900)
                worker = edge_worker_pid(process.pid)
                load(edge_port, WARMUP_REQUESTS)
                time.sleep(args.wait)
                subprocess.run(["callgrind_control", "-z", str(worker)], check=True, capture_output=True)
                started = time.monotonic()
                load(edge_port, args.requests)
                took = time.monotonic() - started
                time.sleep(args.wait)
                subprocess.run(["callgrind_control", "-d", str(worker)], check=True, capture_output=True)
            finally:
                process.terminate()
                process.wait(timeout=600)
        dump = out.with_name(f"{out.name}.{worker}.1").read_text(errors="replace")
    total = re.search(r"^(?:summary|totals): (\d+)", dump, re.MULTILINE)
    if total is None:
        raise SystemExit("no total in the callgrind dump")
    requests = args.requests // CONCURRENCY * CONCURRENCY
    side = "logs off" if args.logs_off else "logs on"
    print(f"{args.src} ({side}): {int(total.group(1)) / requests:,.0f} instructions per request ({took:.0f} s of load)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=REPO_ROOT / "src", help="the source tree (a src directory)")
    parser.add_argument("--logs-off", action="store_true", help="with [logs] enabled = false")
    parser.add_argument("--requests", type=int, default=15_000, help="measured requests (default 15000)")
    parser.add_argument("--stretch", type=float, default=60.0, help="factor for the edge's timers (default 60)")
    parser.add_argument("--wait", type=float, default=70.0, help="seconds after the load, for the timers (default 70)")
    args = parser.parse_args(argv)
    if not (args.src / "edgeplane").is_dir():
        parser.error(f"{args.src} is not a src directory holding edgeplane")
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
