"""Blocks, transactions, receipts and logs in the JSON shapes Ethereum nodes answer with."""

from __future__ import annotations

from typing import Any

from eth._utils.address import generate_contract_address
from eth.abc import BlockAPI, BlockHeaderAPI, ReceiptAPI, SignedTransactionAPI

EMPTY_OMMERS_HASH = "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347"


def hex_bytes(value: bytes) -> str:
    """``0x``-prefixed hex data."""
    return "0x" + value.hex()


def hex_quantity(value: int) -> str:
    """A quantity in JSON-RPC form."""
    return hex(value)


def hex_address(value: bytes) -> str | None:
    """A lower-case address, or None for the empty ``to`` of a creation."""
    return "0x" + value.hex() if value else None


def bloom_hex(bloom: int) -> str:
    """A 256-byte logs bloom."""
    return "0x" + bloom.to_bytes(256, "big").hex()


def header_json(header: BlockHeaderAPI, *, size: int) -> dict[str, Any]:
    """The members of a block object that come from its header."""
    shape: dict[str, Any] = {
        "number": hex_quantity(header.block_number),
        "hash": hex_bytes(header.hash),
        "parentHash": hex_bytes(header.parent_hash),
        "nonce": hex_bytes(header.nonce),
        "mixHash": hex_bytes(header.mix_hash),
        "sha3Uncles": hex_bytes(header.uncles_hash),
        "logsBloom": bloom_hex(header.bloom),
        "transactionsRoot": hex_bytes(header.transaction_root),
        "stateRoot": hex_bytes(header.state_root),
        "receiptsRoot": hex_bytes(header.receipt_root),
        "miner": hex_address(header.coinbase) or "0x" + "00" * 20,
        "difficulty": hex_quantity(header.difficulty),
        "totalDifficulty": "0x0",
        "extraData": hex_bytes(header.extra_data),
        "size": hex_quantity(size),
        "gasLimit": hex_quantity(header.gas_limit),
        "gasUsed": hex_quantity(header.gas_used),
        "timestamp": hex_quantity(header.timestamp),
    }
    optional = {
        "baseFeePerGas": "base_fee_per_gas",
        "withdrawalsRoot": "withdrawals_root",
        "blobGasUsed": "blob_gas_used",
        "excessBlobGas": "excess_blob_gas",
        "parentBeaconBlockRoot": "parent_beacon_block_root",
        "requestsHash": "requests_hash",
    }
    for member, attribute in optional.items():
        value = getattr(header, attribute, None)
        if value is None:
            continue
        shape[member] = hex_bytes(value) if isinstance(value, bytes) else hex_quantity(value)
    return shape


def block_json(block: BlockAPI, *, full_transactions: bool, size: int) -> dict[str, Any]:
    """A block as ``eth_getBlockByNumber``/``ByHash`` answer it."""
    shape = header_json(block.header, size=size)
    if full_transactions:
        shape["transactions"] = [
            transaction_json(tx, block=block, index=index) for index, tx in enumerate(block.transactions)
        ]
    else:
        shape["transactions"] = [hex_bytes(tx.hash) for tx in block.transactions]
    shape["uncles"] = []
    withdrawals = getattr(block, "withdrawals", None)
    if withdrawals is not None:
        shape["withdrawals"] = [
            {
                "index": hex_quantity(w.index),
                "validatorIndex": hex_quantity(w.validator_index),
                "address": hex_address(w.address),
                "amount": hex_quantity(w.amount),
            }
            for w in withdrawals
        ]
    return shape


def effective_gas_price(transaction: SignedTransactionAPI, base_fee: int | None) -> int:
    """What the sender paid per gas in a block with ``base_fee``."""
    if base_fee is None or transaction.type_id is None:
        return int(transaction.gas_price)
    return min(int(transaction.max_fee_per_gas), base_fee + int(transaction.max_priority_fee_per_gas))


def transaction_json(
    transaction: SignedTransactionAPI, *, block: BlockAPI | None = None, index: int | None = None
) -> dict[str, Any]:
    """A transaction as ``eth_getTransactionByHash`` answers it; block members null while it is pending."""
    type_id = transaction.type_id or 0
    shape: dict[str, Any] = {
        "blockHash": hex_bytes(block.hash) if block is not None else None,
        "blockNumber": hex_quantity(block.number) if block is not None else None,
        "transactionIndex": hex_quantity(index) if index is not None else None,
        "hash": hex_bytes(transaction.hash),
        "type": hex_quantity(type_id),
        "from": hex_address(transaction.sender),
        "to": hex_address(transaction.to),
        "nonce": hex_quantity(transaction.nonce),
        "gas": hex_quantity(transaction.gas),
        "value": hex_quantity(transaction.value),
        "input": hex_bytes(transaction.data),
        "r": hex_quantity(transaction.r),
        "s": hex_quantity(transaction.s),
    }
    base_fee = getattr(block.header, "base_fee_per_gas", None) if block is not None else None
    if type_id == 0:
        shape["gasPrice"] = hex_quantity(transaction.gas_price)
        shape["v"] = hex_quantity(int(getattr(transaction, "v", 0)))
        shape["chainId"] = hex_quantity(transaction.chain_id) if transaction.chain_id is not None else None
    else:
        shape["chainId"] = hex_quantity(int(transaction.chain_id or 0))
        shape["v"] = hex_quantity(transaction.y_parity)
        shape["yParity"] = hex_quantity(transaction.y_parity)
        shape["accessList"] = [
            {"address": hex_address(address), "storageKeys": ["0x" + key.to_bytes(32, "big").hex() for key in keys]}
            for address, keys in transaction.access_list
        ]
        if type_id == 1:
            shape["gasPrice"] = hex_quantity(transaction.gas_price)
        else:
            shape["maxFeePerGas"] = hex_quantity(transaction.max_fee_per_gas)
            shape["maxPriorityFeePerGas"] = hex_quantity(transaction.max_priority_fee_per_gas)
            shape["gasPrice"] = hex_quantity(
                effective_gas_price(transaction, base_fee) if block is not None else transaction.max_fee_per_gas
            )
    return shape


def log_json(
    log: Any, *, block: BlockAPI, transaction: SignedTransactionAPI, transaction_index: int, log_index: int
) -> dict[str, Any]:
    """One log entry with its place in the chain."""
    address, topics, data = log.address, log.topics, log.data
    return {
        "address": hex_address(address),
        "topics": ["0x" + topic.to_bytes(32, "big").hex() for topic in topics],
        "data": hex_bytes(data),
        "blockNumber": hex_quantity(block.number),
        "blockHash": hex_bytes(block.hash),
        "blockTimestamp": hex_quantity(block.header.timestamp),
        "transactionHash": hex_bytes(transaction.hash),
        "transactionIndex": hex_quantity(transaction_index),
        "logIndex": hex_quantity(log_index),
        "removed": False,
    }


def receipt_json(
    block: BlockAPI, receipts: tuple[ReceiptAPI, ...], index: int, *, first_log_index: int
) -> dict[str, Any]:
    """The receipt of the transaction at ``index`` of ``block``."""
    transaction = block.transactions[index]
    receipt = receipts[index]
    previous = receipts[index - 1].gas_used if index else 0
    base_fee = getattr(block.header, "base_fee_per_gas", None)
    contract = (
        hex_address(generate_contract_address(transaction.sender, transaction.nonce)) if not transaction.to else None
    )
    return {
        "transactionHash": hex_bytes(transaction.hash),
        "transactionIndex": hex_quantity(index),
        "blockHash": hex_bytes(block.hash),
        "blockNumber": hex_quantity(block.number),
        "from": hex_address(transaction.sender),
        "to": hex_address(transaction.to),
        "cumulativeGasUsed": hex_quantity(receipt.gas_used),
        "gasUsed": hex_quantity(receipt.gas_used - previous),
        "contractAddress": contract,
        "logs": [
            log_json(log, block=block, transaction=transaction, transaction_index=index, log_index=first_log_index + n)
            for n, log in enumerate(receipt.logs)
        ],
        "logsBloom": bloom_hex(receipt.bloom),
        "status": "0x1" if receipt.state_root == b"\x01" else "0x0",
        "effectiveGasPrice": hex_quantity(effective_gas_price(transaction, base_fee)),
        "type": hex_quantity(transaction.type_id or 0),
    }
