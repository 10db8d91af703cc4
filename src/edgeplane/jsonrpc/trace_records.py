"""Parity-style trace records: selecting them for ``trace_filter`` and building them from geth call frames.

``trace_filter`` answers with flat "parity" trace records (erigon, reth, nethermind and anvil serve it natively).
Geth-style nodes have no ``trace_filter``; they give, per transaction, the nested call tree of the call tracer
(``debug_traceBlockByNumber`` with ``{"tracer": "callTracer"}``). This module turns that tree into the records a
native ``trace_filter`` would list, and applies the method's address matching and ``after``/``count`` paging.

It is written by hand because no library does this conversion: web3.py and eth-utils parse neither shape, and the
converters that exist live inside nodes (geth's ``flatCallTracer``, which most geth-style upstreams do not enable
and which anvil does not implement). The rules below were checked against anvil 1.7.1, whose ``trace_filter``
comes from the same tracing code as reth's, by the end-to-end test in ``tests/jsonrpc/test_trace_records.py``.

Matching (``trace_matches``), as reth and anvil define it. A record has a source and a target address:

============  =================  ==========================================
record type   source             target
============  =================  ==========================================
call          ``action.from``    ``action.to``
create        ``action.from``    ``result.address`` (none if result is null)
suicide       ``action.address`` ``action.refundAddress``
reward        (none)             ``action.author`` (reth's rule; anvil has no rewards)
============  =================  ==========================================

An empty address set is "not constrained" and accepts any address, even a missing one; a non-empty set accepts only
its members. ``intersection`` needs both sides to accept. ``union`` with both sets given needs either side; with
one set empty it is decided by the other set alone (otherwise the empty set would accept every trace); with both
empty every trace matches. Addresses compare in lower case.

Conversion (``traces_from_call_frames``): CALL/STATICCALL/DELEGATECALL/CALLCODE become ``call`` records with the
lower-case ``callType``; CREATE/CREATE2 become ``create`` records; SELFDESTRUCT becomes a ``suicide`` record with a
null result. Records are ordered by transaction position, then depth first (a frame before its children). A failed
frame carries ``error`` in parity wording (the mapping geth's own ``flatCallTracer`` uses). A reverted frame keeps
its result (gas used, and the revert data as ``output`` or ``code``); any other failure has a null result, as in
reth and anvil. The root frame's figures are net of the transaction's intrinsic gas: ``action.gas`` is the gas
limit minus intrinsic gas, and ``result.gasUsed`` the execution gas alone.

Remaining differences from a native ``trace_filter`` (the call tracer does not carry the information):

- Root ``result.gasUsed`` is the receipt's gas used minus intrinsic gas. The native figure is taken before the gas
  refund, so a transaction that earned one (for example by clearing storage) shows a ``gasUsed`` smaller by the
  refund. When the EIP-7623 calldata floor set the receipt's gas (Prague blocks),
  the execution share cannot be told apart from the floor; the sum of the root's child frames' ``gasUsed`` is
  reported, a lower bound (0 for a plain transfer with data, which is then exact).
- Intrinsic gas is read from the node when its call tracer already reports the root's ``gas`` net of it (anvil,
  older geth); current geth reports the gas limit, and intrinsic gas is then computed from the transaction:
  21000, 4/16 per zero/non-zero calldata byte, 32000 and (from Shanghai) 2 per initcode word for a creation, 2400
  per access-list address and 1900 per storage key, 25000 per EIP-7702 authorization. Blocks before Istanbul
  (68 gas per non-zero calldata byte) are computed wrongly in that case.
- A failed inner CREATE/CREATE2 whose revert keeps a result has ``result.address`` null: the call tracer drops the
  address of failed creations and the creator's nonce or the CREATE2 salt needed to recompute it is not in the
  frame. A failed top-level creation's address is recomputed from the sender and the transaction nonce.
- Errors with no parity equivalent in geth's mapping keep the node's wording.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import rlp
from eth_utils.crypto import keccak

TraceRecord = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TraceSelection:
    """Which traces ``trace_filter`` returns: address sets, how they combine, and the page."""

    from_addresses: frozenset[str]  # lower-case 0x-hex; empty means "not constrained"
    to_addresses: frozenset[str]  # lower-case 0x-hex
    mode: Literal["union", "intersection"]
    after: int  # skip this many matching traces
    count: int  # then return at most this many


class CallFrameError(ValueError):
    """The call-tracer output does not fit the block: wrong number of items, a transaction hash that differs, a
    frame that failed to trace, or a frame without the members every call frame has."""


# ----------------------------------------------------------------------------------------------------------------
# Matching and selection


_ADDRESS_MEMBERS: dict[str, tuple[str, ...]] = {
    "action": ("from", "to", "address", "refundAddress", "author"),
    "result": ("address",),
}


def normalise_trace(trace: TraceRecord) -> TraceRecord:
    """A copy of ``trace`` with every address lower-cased (``action.from/to/address/refundAddress/author``,
    ``result.address``). Other members are shared with the input, not copied."""
    normalised = dict(trace)
    for section, members in _ADDRESS_MEMBERS.items():
        part = trace.get(section)
        if not isinstance(part, dict):
            continue
        copy = dict(part)
        for member in members:
            value = copy.get(member)
            if isinstance(value, str):
                copy[member] = value.lower()
        normalised[section] = copy
    return normalised


def _endpoints(trace: TraceRecord) -> tuple[str | None, str | None]:
    """The (source, target) addresses the filter compares, lower-cased; None where the record has none."""
    action = trace.get("action")
    if not isinstance(action, dict):
        return None, None
    kind = trace.get("type")
    if kind == "call":
        source, target = action.get("from"), action.get("to")
    elif kind == "create":
        result = trace.get("result")
        source = action.get("from")
        target = result.get("address") if isinstance(result, dict) else None
    elif kind == "suicide":
        source, target = action.get("address"), action.get("refundAddress")
    elif kind == "reward":
        source, target = None, action.get("author")
    else:
        return None, None
    return _lower(source), _lower(target)


def _lower(value: Any) -> str | None:
    return value.lower() if isinstance(value, str) else None


def _accepts(addresses: frozenset[str], address: str | None) -> bool:
    return not addresses or address in addresses


def trace_matches(trace: TraceRecord, selection: TraceSelection) -> bool:
    """Whether ``trace`` passes the selection's address filter (see the module docstring for the rule).
    ``after``/``count`` are not considered. Addresses in ``trace`` may be in any case."""
    source, target = _endpoints(trace)
    from_ok = _accepts(selection.from_addresses, source)
    to_ok = _accepts(selection.to_addresses, target)
    if selection.mode == "intersection":
        return from_ok and to_ok
    if not selection.from_addresses:
        return to_ok
    if not selection.to_addresses:
        return from_ok
    return from_ok or to_ok


def select_traces(traces: Iterable[TraceRecord], selection: TraceSelection) -> list[TraceRecord]:
    """Normalised, matching traces in input order, skipping ``after``, capped at ``count``."""
    selected: list[TraceRecord] = []
    if selection.count <= 0:
        return selected
    skipped = 0
    for trace in traces:
        normalised = normalise_trace(trace)
        if not trace_matches(normalised, selection):
            continue
        if skipped < selection.after:
            skipped += 1
            continue
        selected.append(normalised)
        if len(selected) >= selection.count:
            break
    return selected


# ----------------------------------------------------------------------------------------------------------------
# Conversion from call-tracer frames

_CALL_TYPES = frozenset({"CALL", "STATICCALL", "DELEGATECALL", "CALLCODE"})
_CREATE_TYPES = frozenset({"CREATE", "CREATE2"})

# Geth's call-tracer wording -> parity wording: exact messages first, then prefixes.
_PARITY_ERRORS: dict[str, str] = {
    "execution reverted": "Reverted",
    "out of gas": "Out of gas",
    "contract creation code storage out of gas": "Out of gas",
    "gas uint64 overflow": "Out of gas",
    "max code size exceeded": "Out of gas",
    "invalid jump destination": "Bad jump destination",
    "return data out of bounds": "Out of bounds",
    "stack limit reached 1024 (1023)": "Out of stack",
    "precompiled failed": "Built-in failed",
    "invalid input length": "Built-in failed",
}
_PARITY_ERROR_PREFIXES: tuple[tuple[str, str], ...] = (
    ("out of gas:", "Out of gas"),
    ("invalid opcode", "Bad instruction"),
    ("stack underflow", "Stack underflow"),
)
_REVERTED = "Reverted"

_TX_GAS = 21000
_TX_CREATE_GAS = 32000
_INITCODE_WORD_GAS = 2
_ZERO_BYTE_GAS = 4
_NONZERO_BYTE_GAS = 16
_ACCESS_LIST_ADDRESS_GAS = 2400
_ACCESS_LIST_KEY_GAS = 1900
_AUTHORIZATION_GAS = 25000
_FLOOR_GAS_PER_TOKEN = 10
_NONZERO_BYTE_TOKENS = 4


def _parity_error(message: str) -> str:
    """The parity wording of a call-tracer error message; messages without one are returned unchanged."""
    mapped = _PARITY_ERRORS.get(message)
    if mapped is not None:
        return mapped
    for prefix, wording in _PARITY_ERROR_PREFIXES:
        if message.startswith(prefix):
            return wording
    return message


def traces_from_call_frames(block: dict[str, Any], frames: list[dict[str, Any]]) -> list[TraceRecord]:
    """The parity trace records of a block, ordered by transaction position then depth-first ``traceAddress``,
    as a native ``trace_filter`` lists them.

    ``block`` is an ``eth_getBlockByNumber(n, true)`` result (full transactions); ``frames`` is the
    ``debug_traceBlockByNumber(n, {"tracer": "callTracer"})`` result: one ``{"txHash"?, "result": frame}`` item per
    transaction in block order (a bare frame is accepted too, as ``debug_traceTransaction`` returns it).
    Raises ``CallFrameError`` when the frames do not fit the block or a transaction could not be traced.
    """
    transactions = block.get("transactions")
    if not isinstance(transactions, list):
        raise CallFrameError("block has no transaction list")
    if len(frames) != len(transactions):
        raise CallFrameError(f"block has {len(transactions)} transactions but the tracer gave {len(frames)} frames")
    block_hash = block.get("hash")
    block_number = _quantity(block.get("number"), "block number")
    records: list[TraceRecord] = []
    for position, (tx, item) in enumerate(zip(transactions, frames, strict=True)):
        if not isinstance(tx, dict):
            raise CallFrameError("block transactions must be full objects (eth_getBlockByNumber(n, true))")
        tx_hash = tx.get("hash")
        root = _root_frame(item, tx_hash)
        context = {
            "blockHash": block_hash,
            "blockNumber": block_number,
            "transactionHash": tx_hash,
            "transactionPosition": position,
        }
        root_gas, root_gas_used = _root_gas(block, tx, root)
        for trace_address, frame in _walk(root, []):
            record = _record(frame, trace_address, context)
            if not trace_address:
                _apply_root_gas(record, root_gas, root_gas_used)
                _fill_failed_creation_address(record, tx)
            records.append(record)
    return records


def _root_frame(item: Any, tx_hash: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise CallFrameError(f"call frame of transaction {tx_hash} is not an object")
    if "result" not in item and "type" in item:
        return item
    if item.get("error") is not None and item.get("result") is None:
        raise CallFrameError(f"transaction {tx_hash} could not be traced: {item['error']}")
    traced_hash = item.get("txHash")
    if isinstance(traced_hash, str) and isinstance(tx_hash, str) and traced_hash.lower() != tx_hash.lower():
        raise CallFrameError(f"call frame of transaction {traced_hash} is in the place of {tx_hash}")
    frame = item.get("result")
    if not isinstance(frame, dict) or "type" not in frame:
        raise CallFrameError(f"call frame of transaction {tx_hash} has no frame")
    return frame


def _walk(frame: dict[str, Any], trace_address: list[int]) -> Iterator[tuple[list[int], dict[str, Any]]]:
    yield trace_address, frame
    for index, child in enumerate(_children(frame)):
        yield from _walk(child, [*trace_address, index])


def _children(frame: dict[str, Any]) -> list[dict[str, Any]]:
    calls = frame.get("calls")
    return calls if isinstance(calls, list) else []


def _record(frame: dict[str, Any], trace_address: list[int], context: dict[str, Any]) -> TraceRecord:
    frame_type = str(frame.get("type", "")).upper()
    error = frame.get("error")
    parity_wording = _parity_error(error) if isinstance(error, str) and error else None
    record: TraceRecord = {}
    if frame_type == "SELFDESTRUCT":
        kind = "suicide"
        record["action"] = {
            "address": _address(frame.get("from")),
            "balance": _hex(frame.get("value")),
            "refundAddress": _address(frame.get("to")),
        }
        result: dict[str, Any] | None = None
    elif frame_type in _CREATE_TYPES:
        kind = "create"
        record["action"] = {
            "from": _address(frame.get("from")),
            "gas": _hex(frame.get("gas")),
            "init": _data(frame.get("input")),
            "value": _hex(frame.get("value")),
            "creationMethod": frame_type.lower(),
        }
        result = {
            "address": _address(frame.get("to")),
            "code": _data(frame.get("output")),
            "gasUsed": _hex(frame.get("gasUsed")),
        }
    else:
        # CALL, STATICCALL, DELEGATECALL, CALLCODE; an unknown type is kept as a call of that type rather than
        # failing the whole filter.
        kind = "call"
        record["action"] = {
            "from": _address(frame.get("from")),
            "callType": frame_type.lower(),
            "gas": _hex(frame.get("gas")),
            "input": _data(frame.get("input")),
            "to": _address(frame.get("to")),
            "value": _hex(frame.get("value")),
        }
        result = {"gasUsed": _hex(frame.get("gasUsed")), "output": _data(frame.get("output"))}
    record["blockHash"] = context["blockHash"]
    record["blockNumber"] = context["blockNumber"]
    if parity_wording is not None and kind != "suicide":
        record["error"] = parity_wording
        if parity_wording != _REVERTED:
            result = None
    record["result"] = result
    record["subtraces"] = len(_children(frame))
    record["traceAddress"] = trace_address
    record["transactionHash"] = context["transactionHash"]
    record["transactionPosition"] = context["transactionPosition"]
    record["type"] = kind
    return record


def _apply_root_gas(record: TraceRecord, gas: int, gas_used: int) -> None:
    if record["type"] == "suicide":
        return
    record["action"]["gas"] = hex(gas)
    if isinstance(record["result"], dict):
        record["result"]["gasUsed"] = hex(gas_used)


def _root_gas(block: dict[str, Any], tx: dict[str, Any], root: dict[str, Any]) -> tuple[int, int]:
    """(gas available to execution, execution gas used) of the root frame, both net of intrinsic gas."""
    gas_limit = _quantity(tx.get("gas"), "transaction gas")
    frame_gas = _quantity(root.get("gas", "0x0"), "root frame gas")
    receipt_gas_used = _quantity(root.get("gasUsed", "0x0"), "root frame gasUsed")
    # A root frame with less gas than the limit is net of intrinsic gas already (anvil, older geth), and the
    # node's figure is exact; current geth reports the limit itself, so intrinsic gas is computed. Both report the
    # receipt's gas used, intrinsic gas included.
    node_deducted = frame_gas < gas_limit
    intrinsic = gas_limit - frame_gas if node_deducted else min(_intrinsic_gas(tx, block), gas_limit)
    execution_gas = gas_limit - intrinsic
    gas_used = receipt_gas_used - intrinsic
    floor = _calldata_floor_gas(tx, block)
    if floor is not None and floor > intrinsic and receipt_gas_used == floor:
        # The EIP-7623 floor set the receipt's figure; the execution share is hidden. Report what the child frames
        # prove was spent.
        children = sum(_quantity(child.get("gasUsed", "0x0"), "gasUsed") for child in _children(root))
        gas_used = min(children, gas_used)
    return execution_gas, max(gas_used, 0)


def _intrinsic_gas(tx: dict[str, Any], block: dict[str, Any]) -> int:
    """The gas a transaction pays before execution starts (Istanbul calldata prices; the initcode word cost from
    Shanghai on, recognised by the block's ``withdrawalsRoot``)."""
    data = _bytes(tx.get("input", tx.get("data")))
    zeros = data.count(0)
    gas = _TX_GAS + zeros * _ZERO_BYTE_GAS + (len(data) - zeros) * _NONZERO_BYTE_GAS
    if tx.get("to") is None:
        gas += _TX_CREATE_GAS
        if "withdrawalsRoot" in block:
            gas += _INITCODE_WORD_GAS * ((len(data) + 31) // 32)
    for entry in tx.get("accessList") or []:
        keys = (entry.get("storageKeys") or []) if isinstance(entry, dict) else []
        gas += _ACCESS_LIST_ADDRESS_GAS + _ACCESS_LIST_KEY_GAS * len(keys)
    gas += _AUTHORIZATION_GAS * len(tx.get("authorizationList") or [])
    return gas


def _calldata_floor_gas(tx: dict[str, Any], block: dict[str, Any]) -> int | None:
    """The EIP-7623 minimum gas of a transaction in a Prague block (recognised by ``requestsHash``), else None."""
    if "requestsHash" not in block:
        return None
    data = _bytes(tx.get("input", tx.get("data")))
    zeros = data.count(0)
    tokens = zeros + (len(data) - zeros) * _NONZERO_BYTE_TOKENS
    return _TX_GAS + _FLOOR_GAS_PER_TOKEN * tokens


def _fill_failed_creation_address(record: TraceRecord, tx: dict[str, Any]) -> None:
    """The call tracer drops the address of a failed creation; for the top-level one it follows from the
    sender and the transaction nonce."""
    result = record["result"]
    if record["type"] != "create" or not isinstance(result, dict) or result["address"] is not None:
        return
    sender, nonce = tx.get("from"), tx.get("nonce")
    if isinstance(sender, str) and nonce is not None:
        result["address"] = _creation_address(sender, _quantity(nonce, "transaction nonce"))


def _creation_address(sender: str, nonce: int) -> str:
    """The address CREATE gives a contract made by ``sender`` with ``nonce``: keccak(rlp([sender, nonce]))[12:]."""
    return "0x" + keccak(rlp.encode([_bytes(sender), nonce]))[12:].hex()


# ----------------------------------------------------------------------------------------------------------------
# Field forms


def _quantity(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16) if value[:2] in ("0x", "0X") else int(value)
        except ValueError:
            pass
    raise CallFrameError(f"{what} is not a quantity: {value!r}")


def _hex(value: Any) -> str:
    """A quantity in canonical hex form; a missing one (STATICCALL value) is zero."""
    return hex(0 if value is None else _quantity(value, "quantity"))


def _data(value: Any) -> str:
    return value.lower() if isinstance(value, str) and value else "0x"


def _address(value: Any) -> str | None:
    return value.lower() if isinstance(value, str) and value else None


def _bytes(value: Any) -> bytes:
    if not isinstance(value, str):
        return b""
    text = value[2:] if value[:2] in ("0x", "0X") else value
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise CallFrameError(f"not hex data: {value[:20]!r}") from None
