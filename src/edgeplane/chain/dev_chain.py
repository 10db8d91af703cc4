"""The embedded development chain: a py-evm chain at the Prague fork, its transaction pool and its miner.

``DevChain`` is synchronous and single-threaded: the JSON-RPC server calls it from one event loop. Raw transactions
are checked as a node checks them (chain id, signature, nonce, gas, fees, balance) before they are queued, so that a
bad one is refused at once with the error a node gives; ``mine()`` then puts every queued transaction into one new
block. With automining the server mines as soon as transactions arrive, so a lone client gets one block per
transaction and concurrent clients share blocks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import rlp
import structlog
from eth.abc import BlockAPI, BlockHeaderAPI, ComputationAPI, ReceiptAPI, SignedTransactionAPI, StateAPI
from eth.chains.base import MiningChain
from eth.constants import ZERO_ADDRESS, ZERO_HASH32
from eth.db.atomic import AtomicDB
from eth.exceptions import BlockNotFound, HeaderNotFound, TransactionNotFound
from eth.vm.forks.prague import PragueVM
from eth_typing import Address, Hash32
from eth_utils.address import to_canonical_address

from edgeplane.chain.call_traces import tracing_vm_class, transaction_traces
from edgeplane.chain.dev_accounts import DEV_ACCOUNT_BALANCE_WEI, dev_accounts
from edgeplane.chain.errors import ChainError
from edgeplane.chain.kv_store import SqliteKeyValue

log = structlog.get_logger(__name__)

DEFAULT_CHAIN_ID = 1337
DEFAULT_GAS_LIMIT = 30_000_000
_META_KEY = b"edgeplane:devchain:meta"


@dataclass(frozen=True, slots=True)
class ChainConfig:
    """How a development chain is built."""

    chain_id: int = DEFAULT_CHAIN_ID
    gas_limit: int = DEFAULT_GAS_LIMIT
    accounts: int = 10
    database: Path | None = None  # None: in memory only


@dataclass(slots=True)
class MinedBlock:
    """A block the miner produced, and the hashes of the transactions it holds."""

    block: BlockAPI
    transaction_hashes: list[bytes] = field(default_factory=list)


class DevChain:
    """One development chain: state, pool and miner."""

    def __init__(self, config: ChainConfig) -> None:
        self.config = config
        self._store = SqliteKeyValue(config.database) if config.database is not None else None
        base_db = AtomicDB(self._store) if self._store is not None else AtomicDB()
        chain_class = MiningChain.configure(
            __name__="EdgeplaneDevChain", vm_configuration=((0, tracing_vm_class(PragueVM)),), chain_id=config.chain_id
        )
        self._trace_table: dict[int, bytes] = {}
        if self._store is not None:
            self._store.connection.execute(
                "CREATE TABLE IF NOT EXISTS traces (block INTEGER PRIMARY KEY, records BLOB NOT NULL)"
            )
        meta = self._read_meta(base_db)
        self.chain: MiningChain
        if meta is None:
            self.chain = chain_class.from_genesis(  # type: ignore[assignment]
                base_db, self._genesis_params(), self._genesis_state()
            )
            base_db[_META_KEY] = orjson.dumps({"chain_id": config.chain_id})
            self._commit()
            log.info("created a development chain", chain_id=config.chain_id, database=str(config.database))
        else:
            if meta.get("chain_id") != config.chain_id:
                raise ChainError(
                    f"the chain in {config.database} has chain id {meta.get('chain_id')}, not {config.chain_id}; "
                    "start it fresh to change the chain id"
                )
            self.chain = chain_class(base_db)
            log.info(
                "opened the development chain",
                chain_id=config.chain_id,
                head=self.chain.get_canonical_head().block_number,
                database=str(config.database),
            )
        self._base_fee_for = b""
        self._next_base_fee = 0
        self._pending: list[SignedTransactionAPI] = []
        self._pending_hashes: set[bytes] = set()
        self._pending_nonces: dict[Address, int] = {}
        self._pending_costs: dict[Address, int] = {}

    @staticmethod
    def _read_meta(base_db: AtomicDB) -> dict[str, Any] | None:
        try:
            meta: dict[str, Any] = orjson.loads(base_db[_META_KEY])
        except KeyError:
            return None
        return meta

    def _genesis_params(self) -> dict[str, Any]:
        return {
            "coinbase": ZERO_ADDRESS,
            "difficulty": 0,
            "gas_limit": self.config.gas_limit,
            "timestamp": int(time.time()),
            "extra_data": b"",
            "nonce": b"\x00" * 8,
            "mix_hash": ZERO_HASH32,
        }

    def _genesis_state(self) -> Any:
        return {
            to_canonical_address(account.address): {
                "balance": DEV_ACCOUNT_BALANCE_WEI,
                "nonce": 0,
                "code": b"",
                "storage": {},
            }
            for account in dev_accounts(self.config.accounts)
        }

    def _commit(self) -> None:
        if self._store is not None:
            self._store.commit()

    def close(self) -> None:
        """Writes everything down and closes the database."""
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- blocks and state ----------------------------------------------------------------------------------------

    @property
    def chain_id(self) -> int:
        """The chain id every transaction must be signed for."""
        return self.config.chain_id

    def head(self) -> BlockHeaderAPI:
        """The latest mined block's header."""
        return self.chain.get_canonical_head()

    def header_by_number(self, number: int) -> BlockHeaderAPI | None:
        """The canonical header at ``number``, or None."""
        try:
            return self.chain.get_canonical_block_header_by_number(number)  # type: ignore[arg-type]
        except HeaderNotFound:
            return None

    def header_by_hash(self, block_hash: bytes) -> BlockHeaderAPI | None:
        """The header with that hash, or None."""
        try:
            return self.chain.get_block_header_by_hash(Hash32(block_hash))
        except HeaderNotFound:
            return None

    def block(self, header: BlockHeaderAPI) -> BlockAPI:
        """The whole block of a header."""
        return self.chain.get_block_by_header(header)

    def state_at(self, header: BlockHeaderAPI) -> StateAPI:
        """The state after the block ``header`` (read-only use)."""
        return self.chain.get_vm(header).state

    def next_base_fee(self) -> int:
        """The base fee of the next block (worked out once per head)."""
        head = self.head()
        if self._base_fee_for != head.hash:
            pending_header = self.chain.create_header_from_parent(head)
            self._next_base_fee = int(pending_header.base_fee_per_gas or 0)
            self._base_fee_for = head.hash
        return self._next_base_fee

    def receipts(self, header: BlockHeaderAPI) -> tuple[ReceiptAPI, ...]:
        """The receipts of a block, in transaction order."""
        vm_class = self.chain.get_vm_class_for_block_number(header.block_number)
        return self.chain.chaindb.get_receipts(header, vm_class.get_receipt_builder())

    def transaction_location(self, transaction_hash: bytes) -> tuple[int, int] | None:
        """(block number, index) of a mined transaction, or None."""
        try:
            number, index = self.chain.chaindb.get_transaction_index(Hash32(transaction_hash))
        except (TransactionNotFound, BlockNotFound, KeyError):
            return None
        return int(number), index

    def pending_transaction(self, transaction_hash: bytes) -> SignedTransactionAPI | None:
        """A queued transaction not yet mined, or None."""
        for transaction in self._pending:
            if transaction.hash == transaction_hash:
                return transaction
        return None

    # -- transactions --------------------------------------------------------------------------------------------

    def decode_transaction(self, raw: bytes) -> SignedTransactionAPI:
        """A raw signed transaction, decoded and checked for form and signature."""
        builder = self.chain.get_vm().get_transaction_builder()
        try:
            transaction = builder.decode(raw)
        except Exception as exc:  # py-evm raises several kinds for malformed input
            raise ChainError(f"invalid transaction: cannot decode it ({_reason(exc)})") from None
        chain_id = getattr(transaction, "chain_id", None)
        if chain_id is None:
            raise ChainError("only replay-protected (EIP-155) transactions allowed over RPC")
        if chain_id != self.chain_id:
            raise ChainError(f"invalid sender: invalid chain id for signer: have {chain_id} want {self.chain_id}")
        try:
            transaction.validate()
            transaction.check_signature_validity()
            _ = transaction.sender
        except Exception as exc:
            raise ChainError(f"invalid sender: {_reason(exc)}") from None
        return transaction

    def submit(self, raw: bytes) -> SignedTransactionAPI:
        """Checks a raw transaction against the next block and queues it. Raises ``ChainError`` as a node does."""
        transaction = self.decode_transaction(raw)
        if transaction.hash in self._pending_hashes or self.transaction_location(transaction.hash) is not None:
            raise ChainError("already known")
        state = self.state_at(self.head())
        sender = transaction.sender
        expected_nonce = self._pending_nonces.get(sender, state.get_nonce(sender))
        if transaction.nonce < expected_nonce:
            raise ChainError(f"nonce too low: next nonce {expected_nonce}, tx nonce {transaction.nonce}")
        if transaction.nonce > expected_nonce:
            raise ChainError(f"nonce too high: next nonce {expected_nonce}, tx nonce {transaction.nonce}")
        intrinsic = transaction.intrinsic_gas
        if transaction.gas < intrinsic:
            raise ChainError(f"intrinsic gas too low: gas {transaction.gas}, minimum needed {intrinsic}")
        if transaction.gas > self.config.gas_limit:
            raise ChainError("exceeds block gas limit")
        base_fee = self.next_base_fee()
        max_fee = int(transaction.max_fee_per_gas)
        if max_fee < base_fee:
            raise ChainError(
                f"max fee per gas less than block base fee: address {_hex_address(sender)}, "
                f"maxFeePerGas: {max_fee}, baseFee: {base_fee}"
            )
        cost = transaction.gas * max_fee + transaction.value
        balance = state.get_balance(sender) - self._pending_costs.get(sender, 0)
        if balance < cost:
            raise ChainError(
                f"insufficient funds for gas * price + value: address {_hex_address(sender)} have {balance} want {cost}"
            )
        self._pending.append(transaction)
        self._pending_hashes.add(transaction.hash)
        self._pending_nonces[sender] = transaction.nonce + 1
        self._pending_costs[sender] = self._pending_costs.get(sender, 0) + cost
        return transaction

    @property
    def pending_count(self) -> int:
        """Queued transactions waiting for the next block."""
        return len(self._pending)

    def mine(self) -> MinedBlock:
        """Mines one block holding the queued transactions, in order, as many as the block's gas limit takes (an
        empty block when none is queued); the rest stay queued for the next block."""
        transactions: list[SignedTransactionAPI] = []
        gas = 0
        for transaction in self._pending:
            if gas + transaction.gas > self.config.gas_limit:
                break
            transactions.append(transaction)
            gas += transaction.gas
        self._pending = self._pending[len(transactions) :]
        self._requeue()
        head = self.head()
        # The gas limit stays where it was configured (py-evm would let it drift down on light blocks).
        self.chain.header = self.chain.create_header_from_parent(head, gas_limit=self.config.gas_limit)
        result, _receipts, computations = self.chain.mine_all(transactions)
        block = result.imported_block
        try:
            self._index_traces(block, transactions, computations)
        except Exception:  # a block is never lost for want of its traces
            log.exception("tracing failed; the block has no trace records", block=block.number)
        self._commit()
        return MinedBlock(block=block, transaction_hashes=[tx.hash for tx in transactions])

    def _requeue(self) -> None:
        """Recomputes the pool's bookkeeping for the transactions still queued."""
        self._pending_hashes = {transaction.hash for transaction in self._pending}
        self._pending_nonces.clear()
        self._pending_costs.clear()
        for transaction in self._pending:
            sender = transaction.sender
            self._pending_nonces[sender] = transaction.nonce + 1
            cost = transaction.gas * int(transaction.max_fee_per_gas) + transaction.value
            self._pending_costs[sender] = self._pending_costs.get(sender, 0) + cost

    # -- traces --------------------------------------------------------------------------------------------------

    def _index_traces(
        self,
        block: BlockAPI,
        transactions: Sequence[SignedTransactionAPI],
        computations: Sequence[ComputationAPI],
    ) -> None:
        if not transactions:
            return
        block_hash = "0x" + block.hash.hex()
        records: list[dict[str, Any]] = []
        for position, (transaction, computation) in enumerate(zip(transactions, computations, strict=True)):
            records.extend(
                transaction_traces(
                    computation,
                    transaction=transaction,
                    transaction_hash="0x" + transaction.hash.hex(),
                    transaction_position=position,
                    block_hash=block_hash,
                    block_number=block.number,
                )
            )
        encoded = orjson.dumps(records)
        if self._store is not None:
            self._store.connection.execute(
                "INSERT OR REPLACE INTO traces (block, records) VALUES (?, ?)", (block.number, encoded)
            )
        else:
            self._trace_table[block.number] = encoded

    def block_traces(self, first: int, last: int) -> list[dict[str, Any]]:
        """Every trace record of blocks ``first``..``last``, in block, transaction and trace order."""
        encoded_blocks: list[bytes]
        if self._store is not None:
            rows = self._store.connection.execute(
                "SELECT records FROM traces WHERE block BETWEEN ? AND ? ORDER BY block", (first, last)
            ).fetchall()
            encoded_blocks = [row[0] for row in rows]
        else:
            encoded_blocks = [self._trace_table[n] for n in range(first, last + 1) if n in self._trace_table]
        records: list[dict[str, Any]] = []
        for encoded in encoded_blocks:
            records.extend(orjson.loads(encoded))
        return records

    def encoded_size(self, block: BlockAPI) -> int:
        """The size of a block in bytes, as ``size`` reports it."""
        return len(rlp.encode(block))


def _hex_address(address: bytes) -> str:
    return "0x" + address.hex()


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
