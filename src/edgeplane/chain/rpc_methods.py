"""The development chain's JSON-RPC methods: every method of seed 000 and ``trace_filter``, plus the conveniences a
local node offers its own users (``eth_accounts``, ``eth_sendTransaction`` with the dev accounts, ``evm_mine``).

Answers and errors follow what geth answers (shapes in ``edgeplane.chain.json_shapes``). Choices for a post-merge
development chain: ``eth_mining`` is false and ``eth_getWork`` is a method that does not exist (-32601), as on a
post-merge geth; ``eth_syncing`` is false; uncles never exist; ``safe`` and ``finalized`` are the head.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import rlp
from eth.abc import BlockHeaderAPI, ComputationAPI, SignedTransactionAPI
from eth.exceptions import OutOfGas, Revert
from eth.rlp.accounts import Account as AccountRlp
from eth.vm.spoof import SpoofTransaction
from eth_abi.abi import decode as abi_decode
from eth_account import Account
from eth_typing import Address
from eth_utils.address import to_canonical_address, to_checksum_address
from eth_utils.crypto import keccak
from trie.hexary import HexaryTrie

from edgeplane import __version__
from edgeplane.chain.dev_accounts import dev_accounts
from edgeplane.chain.dev_chain import DevChain
from edgeplane.chain.errors import ChainError, ExecutionReverted, InvalidParams, MethodNotFound
from edgeplane.chain.json_shapes import (
    block_json,
    hex_bytes,
    hex_quantity,
    log_json,
    receipt_json,
    transaction_json,
)
from edgeplane.jsonrpc.quantities import parse_address, parse_block_ref, parse_quantity
from edgeplane.jsonrpc.trace_filter_params import parse_trace_filter_params
from edgeplane.jsonrpc.trace_records import TraceSelection, select_traces

Handler = Callable[[list[Any]], Any]
_ERROR_SELECTOR = bytes.fromhex("08c379a0")
_PANIC_SELECTOR = bytes.fromhex("4e487b71")


class ChainRpc:
    """Answers JSON-RPC methods from one ``DevChain``. ``eth_sendRawTransaction`` queues; the server mines."""

    def __init__(self, chain: DevChain) -> None:
        self.chain = chain
        self._dev_keys = {account.address.lower(): account.private_key for account in dev_accounts()}
        self.handlers: dict[str, Handler] = {
            "web3_clientVersion": lambda _: f"edgeplane-devchain/v{__version__}/python",
            "web3_sha3": self.web3_sha3,
            "net_version": lambda _: str(self.chain.chain_id),
            "net_listening": lambda _: True,
            "eth_chainId": lambda _: hex_quantity(self.chain.chain_id),
            "eth_syncing": lambda _: False,
            "eth_mining": lambda _: False,
            "eth_getWork": self.eth_get_work,
            "eth_blockNumber": lambda _: hex_quantity(self.chain.head().block_number),
            "eth_gasPrice": lambda _: hex_quantity(self.chain.next_base_fee() + 10**9),
            "eth_maxPriorityFeePerGas": lambda _: hex_quantity(10**9),
            "eth_feeHistory": self.eth_fee_history,
            "eth_getBalance": self.eth_get_balance,
            "eth_getStorageAt": self.eth_get_storage_at,
            "eth_getTransactionCount": self.eth_get_transaction_count,
            "eth_getCode": self.eth_get_code,
            "eth_getBlockByNumber": self.eth_get_block_by_number,
            "eth_getBlockByHash": self.eth_get_block_by_hash,
            "eth_getBlockTransactionCountByNumber": self.eth_get_block_transaction_count_by_number,
            "eth_getBlockTransactionCountByHash": self.eth_get_block_transaction_count_by_hash,
            "eth_getUncleCountByBlockNumber": self.eth_get_uncle_count_by_number,
            "eth_getUncleCountByBlockHash": self.eth_get_uncle_count_by_hash,
            "eth_getUncleByBlockNumberAndIndex": self.eth_get_uncle_by_number,
            "eth_getUncleByBlockHashAndIndex": self.eth_get_uncle_by_hash,
            "eth_getTransactionByHash": self.eth_get_transaction_by_hash,
            "eth_getTransactionByBlockNumberAndIndex": self.eth_get_transaction_by_number_and_index,
            "eth_getTransactionByBlockHashAndIndex": self.eth_get_transaction_by_hash_and_index,
            "eth_getTransactionReceipt": self.eth_get_transaction_receipt,
            "eth_call": self.eth_call,
            "eth_estimateGas": self.eth_estimate_gas,
            "eth_getLogs": self.eth_get_logs,
            "eth_getProof": self.eth_get_proof,
            "eth_accounts": lambda _: [account.address for account in dev_accounts()],
            "trace_filter": self.trace_filter,
        }

    # -- parameters ----------------------------------------------------------------------------------------------

    def header_at(self, value: Any, *, name: str = "block") -> BlockHeaderAPI:
        """The header a block parameter names (number, tag, or an EIP-1898 object). Unknown: 'header not found'."""
        header = self.find_header(value, name=name)
        if header is None:
            raise ChainError("header not found")
        return header

    def find_header(self, value: Any, *, name: str = "block") -> BlockHeaderAPI | None:
        """Like ``header_at``, but None for a block that does not exist."""
        if isinstance(value, dict):
            if "blockHash" in value:
                return self.chain.header_by_hash(_hash(value["blockHash"], name=f"{name}.blockHash"))
            value = value.get("blockNumber", "latest")
        ref = parse_block_ref("latest" if value is None else value, name=name)
        if isinstance(ref, int):
            return self.chain.header_by_number(ref)
        if ref == "earliest":
            return self.chain.header_by_number(0)
        return self.chain.head()

    def number_at(self, value: Any, *, name: str) -> int:
        """The block number a block parameter names (a number beyond the head is kept as it is)."""
        ref = parse_block_ref(value, name=name)
        if isinstance(ref, int):
            return ref
        return 0 if ref == "earliest" else self.chain.head().block_number

    # -- simple reads --------------------------------------------------------------------------------------------

    def web3_sha3(self, params: list[Any]) -> str:
        return hex_bytes(keccak(_data(_param(params, 0, "data"), name="data")))

    def eth_get_work(self, params: list[Any]) -> Any:
        raise MethodNotFound("the method eth_getWork does not exist/is not available")

    def eth_get_balance(self, params: list[Any]) -> str:
        address = _address(_param(params, 0, "address"))
        return hex_quantity(self.chain.state_at(self.header_at(_optional(params, 1))).get_balance(address))

    def eth_get_transaction_count(self, params: list[Any]) -> str:
        address = _address(_param(params, 0, "address"))
        return hex_quantity(self.chain.state_at(self.header_at(_optional(params, 1))).get_nonce(address))

    def eth_get_code(self, params: list[Any]) -> str:
        address = _address(_param(params, 0, "address"))
        return hex_bytes(self.chain.state_at(self.header_at(_optional(params, 1))).get_code(address))

    def eth_get_storage_at(self, params: list[Any]) -> str:
        address = _address(_param(params, 0, "address"))
        slot = _slot(_param(params, 1, "slot"))
        value = self.chain.state_at(self.header_at(_optional(params, 2))).get_storage(address, slot)
        return "0x" + value.to_bytes(32, "big").hex()

    # -- blocks --------------------------------------------------------------------------------------------------

    def _block_json(self, header: BlockHeaderAPI | None, full: Any) -> dict[str, Any] | None:
        if header is None:
            return None
        block = self.chain.block(header)
        return block_json(block, full_transactions=bool(full), size=self.chain.encoded_size(block))

    def eth_get_block_by_number(self, params: list[Any]) -> dict[str, Any] | None:
        return self._block_json(self.find_header(_param(params, 0, "block")), _optional(params, 1))

    def eth_get_block_by_hash(self, params: list[Any]) -> dict[str, Any] | None:
        header = self.chain.header_by_hash(_hash(_param(params, 0, "blockHash"), name="blockHash"))
        return self._block_json(header, _optional(params, 1))

    def _count(self, header: BlockHeaderAPI | None) -> str | None:
        return None if header is None else hex_quantity(len(self.chain.block(header).transactions))

    def eth_get_block_transaction_count_by_number(self, params: list[Any]) -> str | None:
        return self._count(self.find_header(_param(params, 0, "block")))

    def eth_get_block_transaction_count_by_hash(self, params: list[Any]) -> str | None:
        return self._count(self.chain.header_by_hash(_hash(_param(params, 0, "blockHash"), name="blockHash")))

    def eth_get_uncle_count_by_number(self, params: list[Any]) -> str | None:
        return None if self.find_header(_param(params, 0, "block")) is None else "0x0"

    def eth_get_uncle_count_by_hash(self, params: list[Any]) -> str | None:
        header = self.chain.header_by_hash(_hash(_param(params, 0, "blockHash"), name="blockHash"))
        return None if header is None else "0x0"

    def eth_get_uncle_by_number(self, params: list[Any]) -> None:
        self.find_header(_param(params, 0, "block"))
        parse_quantity(_param(params, 1, "index"), name="index")
        return

    def eth_get_uncle_by_hash(self, params: list[Any]) -> None:
        _hash(_param(params, 0, "blockHash"), name="blockHash")
        parse_quantity(_param(params, 1, "index"), name="index")
        return

    # -- transactions --------------------------------------------------------------------------------------------

    def _transaction_in(self, header: BlockHeaderAPI | None, index: int) -> dict[str, Any] | None:
        if header is None:
            return None
        block = self.chain.block(header)
        if index >= len(block.transactions):
            return None
        return transaction_json(block.transactions[index], block=block, index=index)

    def eth_get_transaction_by_hash(self, params: list[Any]) -> dict[str, Any] | None:
        transaction_hash = _hash(_param(params, 0, "transactionHash"), name="transactionHash")
        location = self.chain.transaction_location(transaction_hash)
        if location is None:
            pending = self.chain.pending_transaction(transaction_hash)
            return None if pending is None else transaction_json(pending)
        number, index = location
        return self._transaction_in(self.chain.header_by_number(number), index)

    def eth_get_transaction_by_number_and_index(self, params: list[Any]) -> dict[str, Any] | None:
        header = self.find_header(_param(params, 0, "block"))
        return self._transaction_in(header, parse_quantity(_param(params, 1, "index"), name="index"))

    def eth_get_transaction_by_hash_and_index(self, params: list[Any]) -> dict[str, Any] | None:
        header = self.chain.header_by_hash(_hash(_param(params, 0, "blockHash"), name="blockHash"))
        return self._transaction_in(header, parse_quantity(_param(params, 1, "index"), name="index"))

    def eth_get_transaction_receipt(self, params: list[Any]) -> dict[str, Any] | None:
        transaction_hash = _hash(_param(params, 0, "transactionHash"), name="transactionHash")
        location = self.chain.transaction_location(transaction_hash)
        if location is None:
            return None
        number, index = location
        header = self.chain.header_by_number(number)
        if header is None:
            return None
        block = self.chain.block(header)
        receipts = self.chain.receipts(header)
        first_log = sum(len(receipt.logs) for receipt in receipts[:index])
        return receipt_json(block, receipts, index, first_log_index=first_log)

    def decode_raw(self, params: list[Any]) -> bytes:
        """The raw transaction bytes of ``eth_sendRawTransaction``."""
        return _data(_param(params, 0, "transaction"), name="transaction")

    def sign_for_dev_account(self, params: list[Any]) -> bytes:
        """``eth_sendTransaction``: fills in and signs a transaction from one of the dev accounts."""
        call = _param(params, 0, "transaction")
        if not isinstance(call, dict):
            raise InvalidParams("invalid transaction: expected an object")
        sender = parse_address(call.get("from"), name="from")
        key = self._dev_keys.get(sender)
        if key is None:
            raise ChainError("unknown account")
        state = self.chain.state_at(self.chain.head())
        nonce = call.get("nonce")
        fields: dict[str, Any] = {
            "chainId": self.chain.chain_id,
            "nonce": state.get_nonce(to_canonical_address(sender)) + self.chain.pending_count
            if nonce is None
            else parse_quantity(nonce, name="nonce"),
            "value": parse_quantity(call.get("value", "0x0"), name="value"),
            "data": _data(call.get("data", call.get("input", "0x")), name="data"),
        }
        if call.get("to") is not None:
            fields["to"] = to_checksum_address(parse_address(call["to"], name="to"))
        fields["gas"] = (
            parse_quantity(call["gas"], name="gas") if call.get("gas") is not None else self._estimate(call, None)
        )
        if call.get("gasPrice") is not None:
            fields["gasPrice"] = parse_quantity(call["gasPrice"], name="gasPrice")
        else:
            fields["maxPriorityFeePerGas"] = parse_quantity(
                call.get("maxPriorityFeePerGas", hex(10**9)), name="maxPriorityFeePerGas"
            )
            fields["maxFeePerGas"] = parse_quantity(
                call.get("maxFeePerGas", hex(2 * self.chain.next_base_fee() + 10**9)), name="maxFeePerGas"
            )
        signed = Account.sign_transaction(fields, key)
        return bytes(signed.raw_transaction)

    # -- execution -----------------------------------------------------------------------------------------------

    def _spoof(self, call: Any, header: BlockHeaderAPI, *, gas: int | None = None) -> SignedTransactionAPI:
        if not isinstance(call, dict):
            raise InvalidParams("invalid call: expected a transaction object")
        sender = to_canonical_address(parse_address(call.get("from") or "0x" + "00" * 20, name="from"))
        to = call.get("to")
        vm = self.chain.chain.get_vm(header)
        unsigned = vm.create_unsigned_transaction(
            nonce=vm.state.get_nonce(sender),
            gas_price=0,
            gas=gas if gas is not None else _optional_quantity(call, "gas", header.gas_limit),
            to=to_canonical_address(parse_address(to, name="to")) if to is not None else Address(b""),
            value=_optional_quantity(call, "value", 0),
            data=_data(call.get("data", call.get("input", "0x")) or "0x", name="data"),
        )
        spoofed: SignedTransactionAPI = SpoofTransaction(unsigned, from_=sender)  # type: ignore[assignment]
        return spoofed

    def _execute(self, transaction: SignedTransactionAPI, header: BlockHeaderAPI) -> ComputationAPI:
        vm = self.chain.chain.get_vm(header)
        with vm.in_costless_state() as state:
            return state.costless_execute_transaction(transaction)

    def eth_call(self, params: list[Any]) -> str:
        header = self.header_at(_optional(params, 1))
        computation = self._execute(self._spoof(_param(params, 0, "transaction"), header), header)
        raise_if_failed(computation)
        return hex_bytes(computation.output)

    def eth_estimate_gas(self, params: list[Any]) -> str:
        return hex_quantity(self._estimate(_param(params, 0, "transaction"), _optional(params, 1)))

    def _estimate(self, call: Any, block: Any) -> int:
        header = self.header_at(block)
        cap = header.gas_limit if not isinstance(call, dict) or call.get("gas") is None else None
        transaction = self._spoof(call, header, gas=cap)
        raise_if_failed(self._execute(transaction, header))
        return int(self.chain.chain.estimate_gas(transaction, header))

    # -- logs ----------------------------------------------------------------------------------------------------

    def eth_get_logs(self, params: list[Any]) -> list[dict[str, Any]]:
        query = _param(params, 0, "filter")
        if not isinstance(query, dict):
            raise InvalidParams("invalid eth_getLogs params: expected [filter object]")
        if query.get("blockHash") is not None:
            if query.get("fromBlock") is not None or query.get("toBlock") is not None:
                raise InvalidParams("invalid eth_getLogs params: blockHash cannot be combined with fromBlock/toBlock")
            header = self.chain.header_by_hash(_hash(query["blockHash"], name="blockHash"))
            if header is None:
                raise ChainError("unknown block")
            headers = [header]
        else:
            first = self.number_at(query.get("fromBlock") or "latest", name="fromBlock")
            last = self.number_at(query.get("toBlock") or "latest", name="toBlock")
            if first > last:
                raise InvalidParams("invalid block range params")
            last = min(last, self.chain.head().block_number)
            headers = [h for n in range(first, last + 1) if (h := self.chain.header_by_number(n)) is not None]
        addresses = _address_set(query.get("address"))
        topics = _topic_filter(query.get("topics"))
        found: list[dict[str, Any]] = []
        for header in headers:
            if header.bloom == 0:
                continue
            block = self.chain.block(header)
            log_index = 0
            for index, receipt in enumerate(self.chain.receipts(header)):
                for log in receipt.logs:
                    if _log_matches(log, addresses, topics):
                        found.append(
                            log_json(
                                log,
                                block=block,
                                transaction=block.transactions[index],
                                transaction_index=index,
                                log_index=log_index,
                            )
                        )
                    log_index += 1
        return found

    # -- fee history ---------------------------------------------------------------------------------------------

    def eth_fee_history(self, params: list[Any]) -> dict[str, Any]:
        count = parse_quantity(_param(params, 0, "blockCount"), name="blockCount", allow_decimal_string=True)
        newest = self.header_at(_param(params, 1, "newestBlock"), name="newestBlock")
        percentiles = _percentiles(_optional(params, 2))
        count = min(count, newest.block_number + 1)
        oldest = newest.block_number - count + 1 if count else newest.block_number
        base_fees: list[str] = []
        blob_fees: list[str] = []
        ratios: list[float] = []
        blob_ratios: list[float] = []
        rewards: list[list[str]] = []
        for number in range(oldest, oldest + count):
            header = self.chain.header_by_number(number)
            assert header is not None
            base_fees.append(hex_quantity(header.base_fee_per_gas or 0))
            blob_fees.append(hex_quantity(self._blob_base_fee(header)))
            ratios.append(header.gas_used / header.gas_limit if header.gas_limit else 0.0)
            blob_ratios.append(getattr(header, "blob_gas_used", 0) / _MAX_BLOB_GAS_PER_BLOCK)
            if percentiles is not None:
                rewards.append(self._rewards(header, percentiles))
        if count:
            following = self.chain.chain.create_header_from_parent(self.chain.header_by_number(oldest + count - 1))  # type: ignore[arg-type]
            base_fees.append(hex_quantity(int(following.base_fee_per_gas or 0)))
            blob_fees.append(hex_quantity(self._blob_base_fee(following)))
        answer: dict[str, Any] = {
            "oldestBlock": hex_quantity(oldest),
            "baseFeePerGas": base_fees,
            "gasUsedRatio": ratios,
            "baseFeePerBlobGas": blob_fees,
            "blobGasUsedRatio": blob_ratios,
        }
        if percentiles is not None:
            answer["reward"] = rewards
        return answer

    def _blob_base_fee(self, header: BlockHeaderAPI) -> int:
        return _fake_exponential(1, getattr(header, "excess_blob_gas", 0), _BLOB_BASE_FEE_UPDATE_FRACTION)

    def _rewards(self, header: BlockHeaderAPI, percentiles: list[float]) -> list[str]:
        block = self.chain.block(header)
        if not block.transactions:
            return ["0x0" for _ in percentiles]
        receipts = self.chain.receipts(header)
        base_fee = header.base_fee_per_gas or 0
        tips = []
        previous = 0
        for transaction, receipt in zip(block.transactions, receipts, strict=True):
            tip = (
                min(int(transaction.max_priority_fee_per_gas), int(transaction.max_fee_per_gas) - base_fee)
                if transaction.type_id not in (None, 0, 1)
                else int(transaction.gas_price) - base_fee
            )
            tips.append((tip, receipt.gas_used - previous))
            previous = receipt.gas_used
        tips.sort()
        answer = []
        for percentile in percentiles:
            threshold = header.gas_used * percentile / 100
            cumulative = 0
            chosen = tips[-1][0]
            for tip, used in tips:
                cumulative += used
                if cumulative >= threshold:
                    chosen = tip
                    break
            answer.append(hex_quantity(max(chosen, 0)))
        return answer

    # -- proofs --------------------------------------------------------------------------------------------------

    def eth_get_proof(self, params: list[Any]) -> dict[str, Any]:
        address = _address(_param(params, 0, "address"))
        keys = _param(params, 1, "storageKeys")
        if not isinstance(keys, list):
            raise InvalidParams("invalid storageKeys: expected an array")
        slots = [_slot(key) for key in keys]
        header = self.header_at(_optional(params, 2))
        database = self.chain.chain.chaindb.db
        state_trie = HexaryTrie(database, header.state_root)
        account_key = keccak(address)
        encoded = state_trie.get(account_key)
        account = rlp.decode(encoded, sedes=AccountRlp) if encoded else AccountRlp()
        storage_trie = HexaryTrie(database, account.storage_root)
        storage_proofs = []
        for raw_key, slot in zip(keys, slots, strict=True):
            slot_key = keccak(slot.to_bytes(32, "big"))
            stored = storage_trie.get(slot_key)
            value = rlp.decode(stored, sedes=rlp.sedes.big_endian_int) if stored else 0
            storage_proofs.append(
                {
                    "key": raw_key,
                    "value": hex_quantity(value),
                    "proof": [
                        hex_bytes(rlp.encode(node))
                        for node in storage_trie.get_proof(slot_key)  # type: ignore[no-untyped-call]
                    ],
                }
            )
        return {
            "address": "0x" + address.hex(),
            "balance": hex_quantity(account.balance),
            "nonce": hex_quantity(account.nonce),
            "codeHash": hex_bytes(account.code_hash),
            "storageHash": hex_bytes(account.storage_root),
            "accountProof": [
                hex_bytes(rlp.encode(node))
                for node in state_trie.get_proof(account_key)  # type: ignore[no-untyped-call]
            ],
            "storageProof": storage_proofs,
        }

    # -- traces --------------------------------------------------------------------------------------------------

    def trace_filter(self, params: list[Any]) -> list[dict[str, Any]]:
        query = parse_trace_filter_params(params)
        head = self.chain.head().block_number
        first = _resolve(query.from_block, head)
        last = _resolve(query.to_block, head)
        if first > last:
            raise InvalidParams("invalid block range params")
        selection = TraceSelection(
            from_addresses=query.from_addresses,
            to_addresses=query.to_addresses,
            mode=query.mode,
            after=query.after,
            count=query.count if query.count is not None else 2**63,
        )
        return select_traces(self.chain.block_traces(first, min(last, head)), selection)


def raise_if_failed(computation: ComputationAPI) -> None:
    """Turns a failed execution into the error a node answers: code 3 with the revert data, or -32000."""
    if not computation.is_error:
        return
    error = computation.error
    if isinstance(error, Revert):
        data = computation.output
        reason = _revert_reason(data)
        message = "execution reverted" + (f": {reason}" if reason else "")
        raise ExecutionReverted(message, data=hex_bytes(data) if data else None)
    if isinstance(error, OutOfGas):
        raise ChainError("out of gas")
    raise ChainError(str(error) or type(error).__name__)


def _revert_reason(data: bytes) -> str | None:
    try:
        if data[:4] == _ERROR_SELECTOR:
            reason: str = abi_decode(["string"], data[4:])[0]
            return reason
        if data[:4] == _PANIC_SELECTOR:
            (code,) = abi_decode(["uint256"], data[4:])
            return f"panic: {hex(code)}"
    except Exception:  # undecodable revert data has no reason
        return None
    return None


_MAX_BLOB_GAS_PER_BLOCK = 1_179_648  # Prague: 9 blobs of 131072 gas
_BLOB_BASE_FEE_UPDATE_FRACTION = 5_007_716  # Prague


def _fake_exponential(factor: int, numerator: int, denominator: int) -> int:
    index = 1
    output = 0
    accumulator = factor * denominator
    while accumulator > 0:
        output += accumulator
        accumulator = (accumulator * numerator) // (denominator * index)
        index += 1
    return output // denominator


def _resolve(ref: int | str, head: int) -> int:
    if isinstance(ref, int):
        return ref
    return 0 if ref == "earliest" else head


def _param(params: list[Any], index: int, name: str) -> Any:
    if index >= len(params):
        raise InvalidParams(f"missing value for required argument {index} ({name})")
    return params[index]


def _optional(params: list[Any], index: int) -> Any:
    return params[index] if index < len(params) else None


def _optional_quantity(call: dict[str, Any], member: str, default: int) -> int:
    value = call.get(member)
    return default if value is None else parse_quantity(value, name=member)


def _data(value: Any, *, name: str) -> bytes:
    if isinstance(value, str) and value[:2] in ("0x", "0X"):
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            pass
    raise InvalidParams(f"invalid {name}: expected 0x-prefixed hex data")


def _hash(value: Any, *, name: str) -> bytes:
    data = _data(value, name=name)
    if len(data) != 32:
        raise InvalidParams(f"invalid {name}: expected a 32-byte hash")
    return data


def _address(value: Any) -> Address:
    return to_canonical_address(parse_address(value, name="address"))


def _slot(value: Any) -> int:
    if isinstance(value, str) and value[:2] in ("0x", "0X") and 2 < len(value) <= 66:
        try:
            return int(value, 16)
        except ValueError:
            pass
    raise InvalidParams(f"invalid storage slot: {value!r}")


def _address_set(value: Any) -> frozenset[Address] | None:
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    return frozenset(_address(item) for item in items)


def _topic_filter(value: Any) -> list[frozenset[int] | None]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidParams("invalid topics: expected an array")
    positions: list[frozenset[int] | None] = []
    for position in value:
        if position is None:
            positions.append(None)
            continue
        options = position if isinstance(position, list) else [position]
        positions.append(frozenset(int.from_bytes(_hash(topic, name="topic"), "big") for topic in options) or None)
    return positions


def _log_matches(log: Any, addresses: frozenset[bytes] | None, topics: list[frozenset[int] | None]) -> bool:
    if addresses is not None and log.address not in addresses:
        return False
    if len(topics) > len(log.topics):
        return False
    return all(wanted is None or topic in wanted for wanted, topic in zip(topics, log.topics, strict=False))


def _percentiles(value: Any) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(p, int | float) and 0 <= p <= 100 for p in value):
        raise InvalidParams("invalid rewardPercentiles: expected increasing numbers from 0 to 100")
    if any(later < earlier for earlier, later in itertools.pairwise(value)):
        raise InvalidParams("invalid rewardPercentiles: expected increasing numbers from 0 to 100")
    return [float(p) for p in value]
