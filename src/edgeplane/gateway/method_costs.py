"""The cost of a JSON-RPC call in compute units: what a request asks of the nodes, as one number a rate limiting
rule can budget (``edgeplane.jsonrpc.cost`` in the Rules language; a batch costs the sum of its calls).

The table is data: edgeplane's defaults (``method_costs.toml`` beside this module) with the operator's
``[gateway.costs]`` (``edgeplane.config.MethodCostSettings``) merged over them, method by method and key by key. A
method is found by its exact name, else by its longest prefix entry (``"debug_*"``), else it costs the table's
``default``. The methods that read a number of blocks cost ``per_block`` more for each: ``eth_getLogs`` and
``trace_filter`` by their range (both ends counted, block tags resolved against the network's head, one block for a
``blockHash`` or two equal bounds), ``eth_feeHistory`` by its block count; at most their ``cap`` (or the table's).
A range the cost cannot measure (a tag while the head is unknown, a bound that is no block number or tag) costs the
cap: the node may have to read that much.

Pricing never fails: parameters of any shape give a cost (the gateway refuses the malformed ones itself).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.config import MethodCostEntry, MethodCostSettings
from edgeplane.jsonrpc.errors import InvalidParams
from edgeplane.jsonrpc.quantities import BlockRef, parse_block_ref, parse_quantity

PREFIX_MARK: Final = "*"


@dataclass(frozen=True, slots=True)
class MethodCost:
    """One method's entry of the table: ``base`` compute units a call, ``per_block`` more for each block it reads
    (0: its blocks do not count), at most ``cap`` with its blocks (None: the table's cap)."""

    base: int
    per_block: int = 0
    cap: int | None = None


# How a method's parameters say how many blocks it reads: the block count, or None when it cannot be told.
BlockCounter = Callable[[Any, int | None], int | None]


def _range_blocks(params: Any, head: int | None) -> int | None:
    """The blocks of a filter object's ``fromBlock``..``toBlock`` (first parameter), as ``eth_getLogs`` and
    ``trace_filter`` read them."""
    if not isinstance(params, list) or not params or not isinstance(params[0], dict):
        return None
    query = params[0]
    if query.get("blockHash") is not None:
        return 1
    try:
        from_ref = _bound(query.get("fromBlock"))
        to_ref = _bound(query.get("toBlock"))
    except InvalidParams:
        return None
    if from_ref == to_ref:
        return 1
    first, last = _resolved(from_ref, head), _resolved(to_ref, head)
    if first is None or last is None:
        return None
    return last - first + 1 if last >= first else 1  # a reversed range is refused by the gateway: one block asked


def _count_blocks(params: Any, head: int | None) -> int | None:
    """``eth_feeHistory``'s block count (first parameter)."""
    if not isinstance(params, list) or not params:
        return None
    try:
        return parse_quantity(params[0], name="blockCount", allow_decimal_string=True)
    except InvalidParams:
        return None


def _bound(value: Any) -> BlockRef:
    return "latest" if value is None else parse_block_ref(value, name="block")


def _resolved(ref: BlockRef, head: int | None) -> int | None:
    if isinstance(ref, int):
        return ref
    if ref == "earliest":
        return 0
    return head  # latest, pending, safe, finalized: the head (safe and finalized a little behind it: more, not less)


BLOCK_COUNTERS: Final[Mapping[str, BlockCounter]] = {
    "eth_getLogs": _range_blocks,
    "trace_filter": _range_blocks,
    "eth_feeHistory": _count_blocks,
}


class MethodCosts:
    """The cost table (see the module docstring). ``cost`` is a pure function of its arguments; each method's
    entry is found once and remembered (a bounded memo: methods are the client's strings)."""

    __slots__ = ("_entry", "cap", "default", "entries", "prefixes")

    def __init__(self, entries: Mapping[str, MethodCost], *, default: int, cap: int) -> None:
        """``entries`` by method name, or by a prefix ending in ``*``; ``default`` prices an unlisted method, ``cap``
        bounds a per-block cost of a method without a cap."""
        self.entries = {name: entry for name, entry in entries.items() if not name.endswith(PREFIX_MARK)}
        # Longest first, so that the first match is the longest prefix.
        self.prefixes = sorted(
            ((name[:-1], entry) for name, entry in entries.items() if name.endswith(PREFIX_MARK)),
            key=lambda pair: -len(pair[0]),
        )
        self.default = default
        self.cap = cap
        self._entry: BoundedMemo[str, MethodCost] = BoundedMemo(self._find, max_entries=1024, max_length=128)

    @classmethod
    def from_settings(cls, settings: MethodCostSettings | None = None) -> MethodCosts:
        """edgeplane's default table with ``settings`` (the operator's ``[gateway.costs]``) merged over it."""
        text = resources.files(__package__).joinpath("method_costs.toml").read_text(encoding="utf-8")
        defaults = MethodCostSettings.model_validate(tomllib.loads(text))
        operator = settings or MethodCostSettings()
        entries: dict[str, MethodCost] = {}
        default = _first(operator.default, defaults.default, 0)
        for table in (defaults, operator):
            for name, given in table.methods.items():
                entries[name] = _merged(entries.get(name), given, default)
        return cls(entries, default=default, cap=_first(operator.cap, defaults.cap, 0))

    def entry(self, method: str) -> MethodCost:
        """The entry that prices ``method``: its own, its longest prefix's, or the default."""
        return self._entry(method)

    def _find(self, method: str) -> MethodCost:
        found = self.entries.get(method)
        if found is not None:
            return found
        for prefix, entry in self.prefixes:
            if method.startswith(prefix):
                return entry
        return MethodCost(self.default)

    def cost(self, method: str, params: Any, head: int | None) -> int:
        """The compute units of one call of ``method`` with ``params`` (as sent: any JSON value), ``head`` the
        network's latest block number when known. Never raises."""
        entry = self._entry(method)
        if not entry.per_block:
            return entry.base
        counter = BLOCK_COUNTERS.get(method)
        if counter is None:
            return entry.base
        cap = self.cap if entry.cap is None else entry.cap
        blocks = counter(params, head)
        if blocks is None:
            return cap
        return min(entry.base + entry.per_block * blocks, cap)


def _first(*values: int | None) -> int:
    for value in values:
        if value is not None:
            return value
    raise ValueError("no value")  # unreachable: the last value is a literal


def _merged(known: MethodCost | None, given: int | MethodCostEntry, default: int) -> MethodCost:
    """``known`` with the keys ``given`` sets replaced; a bare number is a flat cost (no per-block charge)."""
    if isinstance(given, int):
        given = MethodCostEntry(base=given, per_block=0)
    base = known.base if known is not None else default
    per_block = known.per_block if known is not None else 0
    cap = known.cap if known is not None else None
    return MethodCost(
        base=_first(given.base, base),
        per_block=_first(given.per_block, per_block),
        cap=given.cap if given.cap is not None else cap,
    )
