"""One request through the edge, as the router learns of it and the request log records it (``Exchange``), and the
request ids (ray ids) the edge gives requests."""

from __future__ import annotations

import itertools
import os
from typing import Final

from edgeplane.configuration.snapshot import ZoneRoute
from edgeplane.edge.http_server import EdgeResponse
from edgeplane.waf.firewall import ALLOWED, Verdict

# A request id is the process's random 64-bit start plus its count of requests: unique across processes (the odds
# that two processes' ranges meet are those of two random 32-bit prefixes), and no system call per request.
_ray_numbers = itertools.count(int.from_bytes(os.urandom(8), "big") >> 1)


# The ``context`` of a request the edge does not log (``/healthz``): the request log skips it.
NOT_LOGGED: Final = object()


def new_ray_id() -> str:
    """A request id: 16 lowercase hex characters."""
    return "%016x" % (next(_ray_numbers) & 0xFFFF_FFFF_FFFF_FFFF)


class Exchange:
    """One request through the edge: made by the router when the request's head is complete, filled in as it is
    answered, read by the request log once the answer is written (the server tells how many bytes it wrote, and
    when). It does not hold the request (the request holds it, as its ``context``)."""

    __slots__ = (
        "asn",
        "cache_status",
        "country",
        "host",
        "network",
        "origin_duration_ms",
        "origin_status",
        "ray_id",
        "refusal",
        "rpc_error_code",
        "rpc_method",
        "rpc_requests",
        "started_ns",
        "upstream",
        "verdict",
        "zone",
    )

    def __init__(self, host: str, zone: ZoneRoute | None) -> None:
        self.host = host
        self.zone = zone  # None: the host is no web3 hostname
        self.ray_id = ""  # "" until the router starts the exchange
        self.started_ns = 0
        self.country = ""  # "" when unknown
        self.asn = 0  # 0 when unknown
        self.verdict: Verdict = ALLOWED
        self.origin_status: int | None = None  # None: the request never reached an upstream
        self.origin_duration_ms: int | None = None
        self.refusal: EdgeResponse | None = None  # decided from the head, answered after the firewall has run
        self.cache_status = "unknown"  # the gateway's response cache: hit, miss, bypass, dynamic; unknown if not asked
        self.network = ""  # the network of ``/v1/<network>``; "" for a request to no gateway path
        # What the gateway read of the body (``GatewayResponse``): the JSON-RPC method (a batch's first), how many
        # requests (0: not read as JSON-RPC, or the gateway was not asked), the answer's first error code.
        self.rpc_method = ""
        self.rpc_requests = 0
        self.rpc_error_code: int | None = None
        self.upstream = ""  # the label of the upstream node that answered; "" when none did
