"""Parsing of the JSON-RPC parameter types of Ethereum methods that the gateway and the development chain read:
quantities, block numbers and tags, addresses, and the members of filter objects. Each parser names the parameter in
its error, so callers see exactly which value is wrong.
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from edgeplane.jsonrpc.errors import InvalidParams

BlockTag = Literal["latest", "earliest", "safe", "finalized", "pending"]
BLOCK_TAGS: frozenset[str] = frozenset(get_args(BlockTag))
BlockRef = int | BlockTag

_HEX_QUANTITY = re.compile(r"0x[0-9a-fA-F]{1,64}")
_DECIMAL = re.compile(r"[0-9]{1,78}")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


def parse_quantity(value: Any, *, name: str, allow_decimal_string: bool = False) -> int:
    """A non-negative integer given as a JSON number or a ``0x`` hex string (or, when allowed, a decimal string)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise InvalidParams(f"invalid {name}: {value} is negative")
        return value
    if isinstance(value, str):
        if _HEX_QUANTITY.fullmatch(value):
            return int(value, 16)
        if allow_decimal_string and _DECIMAL.fullmatch(value):
            return int(value)
    raise InvalidParams(f"invalid {name}: expected a hex quantity or a number, got {_show(value)}")


def parse_block_ref(value: Any, *, name: str) -> BlockRef:
    """A block number (hex string, JSON number or decimal string) or one of the block tags."""
    if isinstance(value, str) and value in BLOCK_TAGS:
        tag: BlockTag = value  # type: ignore[assignment]
        return tag
    try:
        return parse_quantity(value, name=name, allow_decimal_string=True)
    except InvalidParams:
        raise InvalidParams(
            f"invalid {name}: expected a block number or one of {', '.join(sorted(BLOCK_TAGS))}, got {_show(value)}"
        ) from None


def parse_address(value: Any, *, name: str) -> str:
    """A 20-byte ``0x`` hex address, returned in lower case."""
    if isinstance(value, str) and _ADDRESS.fullmatch(value):
        return value.lower()
    raise InvalidParams(f"invalid {name}: expected a 0x-prefixed 20-byte hex address, got {_show(value)}")


def check_members(value: dict[str, Any], known: frozenset[str], *, name: str) -> None:
    """Refuses an object with a member not in ``known`` (names compare exactly). Why: the gateway reads a filter
    object by its exact member names, but a Go node matches them ignoring case (``FromBlock`` is ``fromBlock`` to
    geth), so a member the gateway does not read could be one the node does. Raises ``InvalidParams`` naming the
    first unknown member in sorted order."""
    if not known.issuperset(value):
        unknown = sorted(set(value) - known)
        raise InvalidParams(f"invalid {name}: unknown member {_show(unknown[0])}")


def to_hex(number: int) -> str:
    """The JSON-RPC hex form of a quantity."""
    return hex(number)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
