"""The SecLang engine (``edgeplane.seclang``) with the OWASP Core Rule Set 3.3.4 against ModSecurity v3 with the same
rules: CPU per request at each paranoia level, in the same run.

Four request mixes:

- ``benign``: the benign mix of the WAF benchmark (``bench/waf_requests.py``: JSON-RPC POSTs to ``/v1/mainnet`` from
  web3.py, ethers, viem and curl, batches, a few GETs), the same requests in every pass;
- ``benign-fresh``: requests of the same kinds, other ones in every round (new addresses, calldata, ids), timed on
  their first pass: what a gateway sees, where the values of JSON-RPC parameters seldom come twice;
- ``corpus``: the requests of CRS 3.3.4's own regression suite, read in place from
  ``../shared/waf/crs-regression-3.3.4.json`` (skipped when it is absent), every ``--corpus-step``-th case; cases the
  web server would refuse or rewrite before any rule runs (a bare CR or LF in a header, a chunked body) are left out.
  Passes after the first find edgeplane's bounded memos (transformations, pattern sets, segments) and RE2's lazily
  built automata warm with these very values, as a scanner replaying its list would;
- ``corpus-cold``: the same requests, each round on a freshly compiled engine warmed only with a few benign requests
  (what is built on first use at the level), timed on its first pass: attack values never seen before.

Engines: ``edgeplane``: :func:`edgeplane.seclang.load_crs` on ``/usr/share/modsecurity-crs/rules``, each request
evaluated in engine mode ``On`` with ``tx.paranoia_level`` and ``tx.crs_setup_version`` set as crs-setup.conf does
(CRS's defaults otherwise: threshold 5); ``modsecurity``: libmodsecurity3 through ``bench/modsecurity.py``
(crs-setup.conf, the paranoia level, threshold 5). Both stop at the first blocking rule.

Per paranoia level and mix, each round times ``--repeat`` passes over the mix for each engine, in alternating order;
figures are medians over ``--rounds`` rounds of the CPU time per request (``time.process_time``) and of the ratio
ModSecurity / edgeplane within a round (the machine is shared: a ratio of the same round moves less than either
time). The first, unmeasured pass warms both engines (and edgeplane's bounded memos).

Usage: ``.venv/bin/python bench/seclang.py [--paranoia-level 1 ...] [--mix benign --mix corpus] [--rounds 5]
[--repeat 1] [--corpus-step 4] [--no-modsecurity]``
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

if __package__:  # python -m bench.seclang
    from bench import modsecurity
    from bench.waf_requests import HttpRequest as BenchRequest
    from bench.waf_requests import benign_requests
else:  # python bench/seclang.py: this file's directory is on sys.path
    import modsecurity
    from waf_requests import HttpRequest as BenchRequest
    from waf_requests import benign_requests

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT / "src") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "src"))

from edgeplane.seclang import HttpRequest, RuleEngine, load_crs  # noqa: E402

CRS_RULES: Final = Path("/usr/share/modsecurity-crs/rules")
CORPUS: Final = REPO_ROOT.parent / "shared" / "waf" / "crs-regression-3.3.4.json"
PARANOIA_LEVELS: Final = (1, 2, 3, 4)
MIXES: Final = ("benign", "benign-fresh", "corpus", "corpus-cold")


@dataclass(frozen=True, slots=True)
class Mix:
    """One request mix in both engines' shapes (the same requests, index for index)."""

    name: str
    ours: list[HttpRequest]
    theirs: list[BenchRequest]
    cold: bool = False  # each round on a freshly compiled engine: nothing of these requests remembered
    fresh: list[tuple[list[HttpRequest], list[BenchRequest]]] | None = None  # other requests in each round


def benign_mix(count: int) -> Mix:
    """The WAF benchmark's benign requests."""
    theirs = benign_requests(count)
    ours = [
        HttpRequest(
            method=request.method.encode(),
            target=request.uri.encode(),
            protocol=b"HTTP/1.1",
            headers=request.headers,
            body=request.body,
            remote_addr=request.client_ip,
        )
        for request in theirs
    ]
    return Mix("benign", ours, theirs)


def corpus_mix(path: Path, step: int) -> Mix | None:
    """Every ``step``-th request of CRS's regression corpus, or None when the corpus is absent."""
    if not path.is_file():
        return None
    ours: list[HttpRequest] = []
    theirs: list[BenchRequest] = []
    for case in orjson.loads(path.read_bytes())["cases"][::step]:
        request: dict[str, Any] = case["request"]
        if request.get("raw") or request.get("body_b64") is not None:
            continue
        headers = tuple((name.encode(), value.encode()) for name, value in request["headers"])
        if any(b"\r" in name + value or b"\n" in name + value for name, value in headers):
            continue
        if any(name.lower() == b"transfer-encoding" for name, _ in headers):
            continue
        body = (request.get("body") or "").encode()
        uri: str = request["uri"]
        path_part, _, query = uri.partition("?")
        host = next((value.decode() for name, value in headers if name.lower() == b"host"), "localhost")
        ours.append(HttpRequest(request["method"].encode(), uri.encode(), request["version"].encode(), headers, body))
        theirs.append(BenchRequest(case["id"], request["method"], host, path_part, query, headers, body, "127.0.0.1"))
    return Mix("corpus", ours, theirs)


def edgeplane_runner(engine: RuleEngine, level: int) -> Callable[[list[HttpRequest]], int]:
    """A pass over requests through the engine at ``level``; returns how many it blocked."""
    tx = {"crs_setup_version": "334", "paranoia_level": str(level)}

    def run(requests: list[HttpRequest]) -> int:
        blocked = 0
        for request in requests:
            blocked += engine.evaluate(request, tx=tx).interrupted_by is not None
        return blocked

    return run


def modsecurity_runner(engine: modsecurity.ModSecurity) -> Callable[[list[BenchRequest]], int]:
    """A pass over requests through ModSecurity; returns how many it blocked."""

    def run(requests: list[BenchRequest]) -> int:
        return sum(engine.inspect(request) is not None for request in requests)

    return run


def cpu_per_request(run: Callable[[Any], int], requests: Sequence[Any], repeat: int) -> float:
    """CPU seconds per request over ``repeat`` passes, the collector paused."""
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        for _ in range(repeat):
            run(requests)
        return (time.process_time() - started) / (repeat * len(requests))
    finally:
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per paranoia level and mix: µs per request of each engine and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paranoia-level", type=int, action="append", choices=PARANOIA_LEVELS)
    parser.add_argument("--mix", action="append", choices=MIXES)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--benign", type=int, default=200, help="size of the benign mix")
    parser.add_argument("--corpus-step", type=int, default=4, help="take every n-th corpus case")
    parser.add_argument("--no-modsecurity", action="store_true", help="time edgeplane only")
    args = parser.parse_args(argv)
    levels = args.paranoia_level or list(PARANOIA_LEVELS)
    mixes: list[Mix] = []
    benign = benign_mix(args.benign)
    for name in args.mix or MIXES:
        if name == "benign-fresh":
            # The same kinds of calls with other addresses, data and ids in every round: new values, as on a gateway.
            size = args.benign
            many = benign_mix(size * (args.rounds * len(levels) + 1))
            slices = [(many.ours[i : i + size], many.theirs[i : i + size]) for i in range(size, len(many.ours), size)]
            mixes.append(Mix(name, many.ours[:size], many.theirs[:size], fresh=slices))
            continue
        mix = benign if name == "benign" else corpus_mix(CORPUS, args.corpus_step)
        if mix is None:
            print(f"{name}: {CORPUS} is absent, skipped")
            continue
        mixes.append(Mix(name, mix.ours, mix.theirs, cold=True) if name == "corpus-cold" else mix)
    started = time.process_time()
    engine = load_crs(CRS_RULES)
    print(f"edgeplane.seclang: CRS compiled in {time.process_time() - started:.2f} s CPU")
    print("level mix         requests  edgeplane µs  modsecurity µs  ratio  blocked (edgeplane/modsecurity)")
    for level in levels:
        ours = edgeplane_runner(engine, level)
        theirs: Callable[[list[BenchRequest]], int] | None = None
        reference: modsecurity.ModSecurity | None = None
        if not args.no_modsecurity:
            try:
                reference = modsecurity.ModSecurity(level)
            except modsecurity.ModSecurityError as error:
                print(f"modsecurity: {error}; timing edgeplane only")
            else:
                theirs = modsecurity_runner(reference)
        try:
            for mix in mixes:
                blocked_ours = ours(mix.ours)
                blocked_theirs = theirs(mix.theirs) if theirs else None
                our_times: list[float] = []
                their_times: list[float] = []
                ratios: list[float] = []
                for round_ in range(args.rounds):
                    order = [0, 1] if round_ % 2 else [1, 0]
                    mine = other = 0.0
                    # benign-fresh: a slice of its own for each round at each level
                    fresh_slice = levels.index(level) * args.rounds + round_
                    ours_requests, theirs_requests = mix.fresh[fresh_slice] if mix.fresh else (mix.ours, mix.theirs)
                    repeat = 1 if mix.fresh else args.repeat
                    for which in order:
                        if which == 0 and mix.cold:
                            fresh = edgeplane_runner(load_crs(CRS_RULES), level)
                            fresh(benign.ours[:20])  # builds what is built on first use at this level
                            mine = cpu_per_request(fresh, mix.ours, 1)
                        elif which == 0:
                            mine = cpu_per_request(ours, ours_requests, repeat)
                        elif theirs is not None:
                            other = cpu_per_request(theirs, theirs_requests, repeat)
                    our_times.append(mine)
                    if theirs is not None:
                        their_times.append(other)
                        ratios.append(other / mine)
                ours_us = 1e6 * statistics.median(our_times)
                theirs_text = f"{1e6 * statistics.median(their_times):14.0f}" if their_times else f"{'-':>14}"
                ratio_text = f"{statistics.median(ratios):6.1f}" if ratios else f"{'-':>6}"
                print(
                    f"PL{level}   {mix.name:<11} {len(mix.ours):8}  {ours_us:12.1f}  {theirs_text}  {ratio_text}  "
                    f"{blocked_ours}/{blocked_theirs if blocked_theirs is not None else '-'}",
                    flush=True,
                )
        finally:
            if reference is not None:
                reference.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
