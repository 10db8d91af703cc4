"""What a request says as JSON-RPC, for the ``edgeplane.jsonrpc.*`` fields: its methods, whether it is a batch and
of how many requests, the network it is sent to, the contract addresses it names and its cost in compute units.

An edgeplane extension of the Rules language (Cloudflare's product has no such fields): a rule reads the calls of a
gateway request as plainly as its headers, so that a contract allowlist or a per-method limit is one expression.

The facts are read from the request's one JSON reading (``edgeplane.body_document``), the one the firewall and the
gateway share, so reading them parses nothing again. They are read leniently and never fail: a body that is not JSON,
or not a JSON-RPC object or batch, has no methods and a batch size of 0; an item without a string method adds no
method; a parameter of the wrong shape names no address. The gateway still checks the envelope (and refuses what is
malformed); these facts only describe what the request asks. Pricing is not the rules' business: the caller passes
a ``CallPricer`` (the gateway's method costs), and without one every request costs 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from edgeplane.body_document import BodyDocument, NotJson

# The most items of a batch that are read. The gateway refuses a body of more than 10 000 objects and arrays
# (``edgeplane.jsonrpc.envelope.MAX_CONTAINERS``), so every batch it serves is read whole; a larger one costs no
# more than this to read, and is refused anyway.
MAX_READ_ITEMS: Final = 10_000

NETWORK_PATH_PREFIX: Final = "/v1/"

# A pricer of one call: (method, params) -> compute units. ``params`` is as sent: any JSON value, or None.
CallPricer = Callable[[str, Any], int]

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")

# Where each method names the contract or account it reads: a member of its first parameter (an object), or the
# first parameter itself (``""``).
_ADDRESS_MEMBER: Final = {
    "eth_call": "to",
    "eth_estimateGas": "to",
    "eth_createAccessList": "to",
    "eth_getLogs": "address",
    "eth_newFilter": "address",
    "eth_getBalance": "",
    "eth_getCode": "",
    "eth_getTransactionCount": "",
    "eth_getStorageAt": "",
    "eth_getProof": "",
}


class JsonRpcFacts(NamedTuple):
    """What a request asks as JSON-RPC (see the module docstring): ``methods`` in order (one per item that has a
    string method; a batch has several), ``batch`` (the body is an array), ``batch_size`` (1 for a single call, the
    array's length for a batch, 0 when the body is not JSON-RPC), ``network`` (``<network>`` of ``/v1/<network>``,
    ``""`` for another path), ``addresses`` (lower-case ``0x`` addresses, each once, in order of first mention) and
    ``cost`` (compute units, 0 without a pricer). A named tuple: it is made for every request a rule reads it
    of, and a frozen dataclass's construction cost ten times as much."""

    methods: tuple[str, ...] = ()
    batch: bool = False
    batch_size: int = 0
    network: str = ""
    addresses: tuple[str, ...] = ()
    cost: int = 0


def network_of(path: str) -> str:
    """The network a gateway path names (``/v1/mainnet`` -> ``mainnet``, as sent), or ``""`` for any other path."""
    return path[len(NETWORK_PATH_PREFIX) :] if path.startswith(NETWORK_PATH_PREFIX) else ""


def read_jsonrpc(body: BodyDocument, path: str, pricer: CallPricer | None = None) -> JsonRpcFacts:
    """The JSON-RPC facts of a request with this body and path (see ``JsonRpcFacts``); ``pricer`` gives each call's
    cost, and the request's is their sum. Never raises for any body; an exception of ``pricer`` propagates (the
    gateway's does not raise)."""
    network = network_of(path)
    try:
        document = body.document()
    except NotJson:
        return JsonRpcFacts(network=network)
    if isinstance(document, dict):
        items: list[Any] = [document]
        batch = False
    elif isinstance(document, list) and document:
        items = document
        batch = True
    else:
        return JsonRpcFacts(network=network)
    methods: list[str] = []
    addresses: dict[str, None] = {}  # an ordered set
    cost = 0
    for item in items if len(items) <= MAX_READ_ITEMS else items[:MAX_READ_ITEMS]:
        if not isinstance(item, dict):
            continue
        method = item.get("method")
        if not isinstance(method, str) or not method:
            continue
        methods.append(method)
        params = item.get("params")
        member = _ADDRESS_MEMBER.get(method)
        if member is not None and isinstance(params, list) and params:
            _named_addresses(params[0], member, addresses)
        if pricer is not None:
            cost += pricer(method, params)
    return JsonRpcFacts(tuple(methods), batch, len(items), network, tuple(addresses), cost)


def _named_addresses(first: Any, member: str, found: dict[str, None]) -> None:
    """Adds the addresses a method's first parameter names (``member`` of it, or itself) to ``found``."""
    if member:
        if not isinstance(first, dict):
            return
        value = first.get(member)
    else:
        value = first
    if isinstance(value, list):  # eth_getLogs and eth_newFilter take one address or a list of them
        for each in value[:MAX_READ_ITEMS]:
            _add_address(each, found)
    else:
        _add_address(value, found)


def _add_address(value: Any, found: dict[str, None]) -> None:
    if isinstance(value, str) and len(value) == 42 and _ADDRESS.fullmatch(value):
        found[value.lower()] = None
