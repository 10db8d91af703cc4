"""``trace_filter``'s parameters: the caller's filter object, checked member by member.

Choices where seed 000 is silent (documented in docs/gateway.md): an omitted ``fromBlock`` is block 0 and an omitted
``toBlock`` is the head, as on erigon and reth; ``toAddress`` and ``fromAddress`` take one address or an array;
``after``/``count`` take JSON numbers, hex or decimal strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from edgeplane.jsonrpc.errors import InvalidParams
from edgeplane.jsonrpc.quantities import BlockRef, check_members, parse_address, parse_block_ref, parse_quantity

TraceFilterMode = Literal["union", "intersection"]
_MEMBERS = frozenset({"fromBlock", "toBlock", "fromAddress", "toAddress", "after", "count", "mode"})


@dataclass(frozen=True, slots=True)
class TraceFilterParams:
    """The caller's filter, checked but not yet resolved against the chain."""

    from_block: BlockRef
    to_block: BlockRef
    from_addresses: frozenset[str]
    to_addresses: frozenset[str]
    after: int
    count: int | None
    mode: TraceFilterMode


def parse_trace_filter_params(params: list[Any]) -> TraceFilterParams:
    """Checks ``[filter]``. Raises ``InvalidParams`` naming the member that is wrong."""
    if len(params) != 1 or not isinstance(params[0], dict):
        raise InvalidParams("invalid trace_filter params: expected [filter object]")
    query: dict[str, Any] = params[0]
    check_members(query, _MEMBERS, name="trace_filter params")

    def present(member: str) -> Any:
        return query.get(member)

    raw_mode = present("mode") or "union"
    if raw_mode not in ("union", "intersection"):
        raise InvalidParams(f"invalid trace_filter mode: expected union or intersection, got {raw_mode!r}")
    mode: TraceFilterMode = "union" if raw_mode == "union" else "intersection"
    from_block = present("fromBlock")
    to_block = present("toBlock")
    after = present("after")
    count = present("count")
    return TraceFilterParams(
        from_block=0 if from_block is None else parse_block_ref(from_block, name="trace_filter fromBlock"),
        to_block="latest" if to_block is None else parse_block_ref(to_block, name="trace_filter toBlock"),
        from_addresses=_addresses(present("fromAddress"), "fromAddress"),
        to_addresses=_addresses(present("toAddress"), "toAddress"),
        after=0 if after is None else parse_quantity(after, name="trace_filter after", allow_decimal_string=True),
        count=None if count is None else parse_quantity(count, name="trace_filter count", allow_decimal_string=True),
        mode=mode,
    )


def _addresses(value: Any, member: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    items = value if isinstance(value, list) else [value]
    return frozenset(parse_address(item, name=f"trace_filter {member}[{index}]") for index, item in enumerate(items))
