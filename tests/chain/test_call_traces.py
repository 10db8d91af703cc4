"""Trace records of transactions run on py-evm, held to anvil's own ``trace_filter``.

The end-to-end test signs the same transactions once and runs them on anvil and on a py-evm chain built with
``tracing_vm_class``, one block each, then compares the records member by member. The unit tests run small
hand-assembled contracts on py-evm alone and state the expected record as a table (the wording and figures come
from anvil 1.7.1, which the end-to-end test re-checks).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import rlp
from eth.abc import ComputationAPI, SignedTransactionAPI
from eth.chains.base import MiningChain
from eth.db.atomic import AtomicDB
from eth.exceptions import (
    FullStack,
    InsufficientStack,
    InvalidInstruction,
    InvalidJumpDestination,
    OutOfBoundsRead,
    OutOfGas,
    ReservedBytesInCode,
    Revert,
    VMError,
    WriteProtection,
)
from eth.vm.forks import PragueVM
from eth_account import Account
from eth_utils import keccak, to_canonical_address, to_checksum_address
from web3 import Web3

from edgeplane.chain.call_traces import UntracedComputation, error_wording, tracing_vm_class, transaction_traces
from tests.contracts import load_contract
from tests.support.anvil import AnvilNode

CHAIN_ID = 31337
SENDER_KEY = AnvilNode.private_keys[0]
SENDER = AnvilNode.addresses[0].lower()
OTHER = AnvilNode.addresses[1].lower()
OTHER_HEX = OTHER[2:]


# ----------------------------------------------------------------------------------------------------------------
# A py-evm chain and signed transactions


class PyEvmChain:
    """A py-evm Prague chain with anvil's first dev accounts funded, one block per transaction."""

    def __init__(self, *, traced: bool = True) -> None:
        vm_class = tracing_vm_class(PragueVM) if traced else PragueVM
        chain_class = MiningChain.configure(
            __name__="TracedTestChain", vm_configuration=((0, vm_class),), chain_id=CHAIN_ID
        )
        genesis = {
            "difficulty": 0,
            "gas_limit": 30_000_000,
            "timestamp": int(time.time()),
            "base_fee_per_gas": 10**9,
        }
        funded = {
            to_canonical_address(address): {"balance": 10**22, "nonce": 0, "code": b"", "storage": {}}
            for address in AnvilNode.addresses
        }
        self.chain: Any = chain_class.from_genesis(AtomicDB(), genesis, funded)

    def apply(self, raw: bytes) -> tuple[SignedTransactionAPI, Any, ComputationAPI, Any]:
        """Runs one signed transaction and mines it alone in a block: (transaction, receipt, computation, block)."""
        transaction = self.chain.get_vm().get_transaction_builder().decode(raw)
        _, receipt, computation = self.chain.apply_transaction(transaction)
        block = self.chain.mine_block()
        return transaction, receipt, computation, block

    def traces(self, raw: bytes) -> list[dict[str, Any]]:
        transaction, _, computation, block = self.apply(raw)
        return transaction_traces(
            computation,
            transaction=transaction,
            transaction_hash="0x" + transaction.hash.hex(),
            transaction_position=0,
            block_hash="0x" + block.hash.hex(),
            block_number=block.number,
        )


@dataclass
class Signer:
    """Signs EIP-1559 transactions from anvil's first dev account with explicit gas, fees and nonces."""

    nonce: int = 0
    account: Any = field(default_factory=lambda: Account.from_key(SENDER_KEY))

    def sign(self, *, to: str | None = None, data: str = "0x", value: int = 0, gas: int = 300_000) -> bytes:
        tx: dict[str, Any] = {
            "nonce": self.nonce,
            "chainId": CHAIN_ID,
            "type": 2,
            "maxFeePerGas": 10**10,
            "maxPriorityFeePerGas": 10**9,
            "gas": gas,
            "value": value,
            "data": data,
        }
        if to is not None:
            tx["to"] = to_checksum_address(to)
        self.nonce += 1
        return bytes(self.account.sign_transaction(tx).raw_transaction)

    def created_address(self, nonce: int) -> str:
        """The address of the contract a creation with ``nonce`` from this account gets."""
        return "0x" + keccak(rlp.encode([bytes.fromhex(SENDER[2:]), nonce]))[12:].hex()


# ----------------------------------------------------------------------------------------------------------------
# Hand-assembled contracts (hex, no 0x)


def returning(runtime: str) -> str:
    """Initcode that deploys ``runtime`` (at most 32 bytes): MSTORE it at 0 left-aligned, RETURN its length."""
    size = len(runtime) // 2
    assert size <= 32
    return "7f" + runtime.ljust(64, "0") + "5f52" + f"60{size:02x}5ff3"


def call_code(opcode: str, address: str, *, value: int | None = None, gas: str = "5a") -> str:
    """Code that runs one CALL-family opcode against ``address`` with empty input and output, then stops."""
    pushed_value = "" if value is None else f"60{value:02x}"
    return "5f5f5f5f" + pushed_value + "73" + address + gas + opcode + "00"


SSTORE_RUNTIME = "600160005500"  # SSTORE(0, 1)
LOG_RUNTIME = "5f5fa000"  # LOG0(0, 0)
CALL_WITH_VALUE_RUNTIME = "5f5f5f5f6001305af100"  # CALL(gas, address(this), 1, ...)
CREATE_RUNTIME = "5f5f5ff000"  # CREATE(0, 0, 0)
SELFDESTRUCT_RUNTIME = "33ff"  # SELFDESTRUCT(caller)


# ----------------------------------------------------------------------------------------------------------------
# Unit tests: py-evm alone


def test_untraced_computations_are_refused() -> None:
    chain = PyEvmChain(traced=False)
    transaction, _, computation, block = chain.apply(Signer().sign(to=OTHER, value=1, gas=21_000))
    with pytest.raises(UntracedComputation, match="tracing_vm_class"):
        transaction_traces(
            computation,
            transaction=transaction,
            transaction_hash="0x" + transaction.hash.hex(),
            transaction_position=0,
            block_hash="0x" + block.hash.hex(),
            block_number=1,
        )


def test_tracing_does_not_change_execution() -> None:
    """Same receipts and state on a traced and a plain chain for transactions that exercise every traced opcode."""
    abi, bytecode = load_contract("TraceTarget")
    run = Web3().eth.contract(abi=abi).encode_abi("run", [7])
    signer = Signer()
    target = signer.created_address(0)
    raws = [
        signer.sign(data=bytecode, gas=3_000_000),
        signer.sign(to=target, data=run, value=5, gas=1_000_000),
        signer.sign(data="0x" + "5f5f5f5f600173" + OTHER_HEX + "5af100"),  # a call refused for its value
    ]
    outcomes = []
    for traced in (True, False):
        chain = PyEvmChain(traced=traced)
        applied = [chain.apply(raw) for raw in raws]
        outcomes.append([(r.gas_used, r.state_root, r.logs) for _, r, _, _ in applied])
    assert outcomes[0] == outcomes[1]


def test_plain_transfer_is_one_call_with_no_gas() -> None:
    chain = PyEvmChain()
    raw = Signer().sign(to=OTHER, value=7, gas=21_000)
    [record] = chain.traces(raw)
    assert record["type"] == "call"
    assert record["action"] == {
        "from": SENDER,
        "callType": "call",
        "gas": "0x0",
        "input": "0x",
        "to": OTHER,
        "value": "0x7",
    }
    assert record["result"] == {"gasUsed": "0x0", "output": "0x"}
    assert (record["subtraces"], record["traceAddress"], record["transactionPosition"], record["blockNumber"]) == (
        0,
        [],
        0,
        1,
    )
    assert "error" not in record
    assert list(record) == [
        "action",
        "blockHash",
        "blockNumber",
        "result",
        "subtraces",
        "traceAddress",
        "transactionHash",
        "transactionPosition",
        "type",
    ]


def test_creation_root_gas_is_net_of_the_initcode_word_cost() -> None:
    """py-evm charges 2 gas per initcode word inside the computation; the record counts it as intrinsic gas."""
    chain = PyEvmChain()
    initcode = "60006000fd"  # REVERT(0, 0), one word
    limit = 100_000
    intrinsic = 21_000 + 32_000 + 2 * 4 + 3 * 16 + 2
    [record] = chain.traces(Signer().sign(data="0x" + initcode, gas=limit))
    assert record["action"]["gas"] == hex(limit - intrinsic)
    assert record["error"] == "Reverted"
    assert record["result"] == {"address": Signer().created_address(0), "code": "0x", "gasUsed": "0x6"}


# Initcode run as a creation transaction -> the root's error, as anvil words it (None: it succeeds).
ROOT_FAILURES = [
    ("5f" * 1025, "Out of stack"),
    ("6001600060003e", "OutOfOffset"),  # RETURNDATACOPY past the (empty) return data
    ("60ef60005360016000f3", "CreateContractStartingWithEF"),
    ("6160016000f3", "CreateContractSizeLimit"),  # RETURN 24577 bytes
    ("fe", "Bad instruction"),
    ("0c", "Bad instruction"),  # an undefined opcode
    ("600456", "Bad jump destination"),
    ("600356005b", "Bad jump destination"),  # JUMP into PUSH1 data that looks like JUMPDEST
    ("01", "StackUnderflow"),
    ("60006000fd", "Reverted"),
]


@pytest.mark.parametrize(("initcode", "error"), ROOT_FAILURES)
def test_root_failure_wording(initcode: str, error: str) -> None:
    chain = PyEvmChain()
    [record] = chain.traces(Signer().sign(data="0x" + initcode))
    assert record["error"] == error
    assert (record["result"] is not None) == (error == "Reverted")


# Initcode whose single inner frame fails -> (type, callType/creationMethod, error) of that frame. The contracts it
# calls are deployed first from the runtimes named.
INNER_FAILURES = [
    (
        "refused call",
        [],
        "5f5f5f5f600173" + OTHER_HEX + "5af100",
        ("call", "call", "Insufficient balance for transfer"),
    ),
    ("refused create", [], "600060006001f000", ("create", "create", "Insufficient balance for transfer")),
    ("static sstore", [SSTORE_RUNTIME], "staticcall:0", ("call", "staticcall", "StateChangeDuringStaticCall")),
    ("static log", [LOG_RUNTIME], "staticcall:0", ("call", "staticcall", "StateChangeDuringStaticCall")),
    ("static value", [CALL_WITH_VALUE_RUNTIME], "staticcall:0", ("call", "staticcall", "CallNotAllowedInsideStatic")),
    ("static create", [CREATE_RUNTIME], "staticcall:0", ("call", "staticcall", "StateChangeDuringStaticCall")),
    (
        "static selfdestruct",
        [SELFDESTRUCT_RUNTIME],
        "staticcall:0",
        ("call", "staticcall", "StateChangeDuringStaticCall"),
    ),
    ("sstore sentry", [SSTORE_RUNTIME], "call2300:0", ("call", "call", "Out of gas")),
    ("precompile gas", [], "60205f5f5f5f60046001f100", ("call", "call", "Out of gas")),
]


def _inner_initcode(spec: str, deployed: list[str]) -> str:
    if ":" not in spec:
        return spec
    how, index = spec.split(":")
    address = deployed[int(index)][2:]
    if how == "staticcall":
        return call_code("fa", address)
    return call_code("f1", address, value=0, gas="6108fc")


@pytest.mark.parametrize(
    ("runtimes", "initcode", "expected"),
    [case[1:] for case in INNER_FAILURES],
    ids=[case[0] for case in INNER_FAILURES],
)
def test_inner_failure_wording(runtimes: list[str], initcode: str, expected: tuple[str, str, str]) -> None:
    chain = PyEvmChain()
    signer = Signer()
    deployed = []
    for runtime in runtimes:
        deployed.append(signer.created_address(signer.nonce))
        chain.apply(signer.sign(data="0x" + returning(runtime)))
    root, inner = chain.traces(signer.sign(data="0x" + _inner_initcode(initcode, deployed)))
    assert "error" not in root
    assert root["subtraces"] == 1
    action = inner["action"]
    assert (inner["type"], action.get("callType") or action.get("creationMethod"), inner["error"]) == expected
    assert inner["result"] is None
    assert inner["traceAddress"] == [0]


def test_create2_collision_lists_the_refused_creation() -> None:
    chain = PyEvmChain()
    creator = Signer().created_address(0)
    root, first, second = chain.traces(Signer().sign(data="0x5f5f5f5ff5505f5f5f5ff500"))
    assert root["subtraces"] == 2
    assert (first["action"]["creationMethod"], first.get("error"), first["action"]["from"]) == (
        "create2",
        None,
        creator,
    )
    assert (second["action"]["creationMethod"], second["error"], second["result"]) == (
        "create2",
        "CreateCollision",
        None,
    )
    assert second["traceAddress"] == [1]


def test_selfdestruct_is_the_last_child_of_its_frame() -> None:
    chain = PyEvmChain()
    signer = Signer()
    contract = signer.created_address(0)
    chain.apply(signer.sign(data="0x" + returning(SELFDESTRUCT_RUNTIME), value=5))
    root, suicide = chain.traces(signer.sign(to=contract, gas=100_000))
    assert root["subtraces"] == 1
    assert suicide == {
        "action": {"address": contract, "balance": "0x5", "refundAddress": SENDER},
        "blockHash": root["blockHash"],
        "blockNumber": 2,
        "result": None,
        "subtraces": 0,
        "traceAddress": [0],
        "transactionHash": root["transactionHash"],
        "transactionPosition": 0,
        "type": "suicide",
    }


@pytest.mark.parametrize(
    ("error", "wording"),
    [
        (Revert(b""), "Reverted"),
        (OutOfGas("Out of gas: Needed 3 - Remaining 1 - Reason: GT"), "Out of gas"),
        (OutOfGas("Net-metered SSTORE always fails below 2300 gas, per EIP-2200", 2300), "Out of gas"),
        (
            OutOfGas("Contract code size exceeds EIP170 limit of 24576.  Got code of size: 24577"),
            "CreateContractSizeLimit",
        ),
        (
            OutOfGas("Contract code size exceeds EIP-3860 limit of 49152. Got code of size: 49153"),
            "CreateInitCodeSizeLimit",
        ),
        (InvalidInstruction("Invalid opcode 0xfe @ 0"), "Bad instruction"),
        (InvalidInstruction("Jump resulted in invalid instruction"), "Bad jump destination"),
        (InvalidJumpDestination("Invalid Jump Destination"), "Bad jump destination"),
        (InsufficientStack("Wanted 2 stack items, only had 0"), "StackUnderflow"),
        (FullStack("Stack limit reached"), "Out of stack"),
        (OutOfBoundsRead("Return data out of bounds"), "OutOfOffset"),
        (WriteProtection("Cannot modify state while inside of a STATICCALL context"), "StateChangeDuringStaticCall"),
        (ReservedBytesInCode("Contract code begins with EOF magic"), "CreateContractStartingWithEF"),
        (VMError("Invalid ECADD parameters"), "Built-in failed"),
    ],
)
def test_error_wording(error: VMError, wording: str) -> None:
    assert error_wording(error) == wording


# ----------------------------------------------------------------------------------------------------------------
# Against anvil


@dataclass
class Outcome:
    """One transaction as both chains traced it."""

    anvil: list[dict[str, Any]]
    anvil_block_hash: str
    ours: list[dict[str, Any]]
    our_block_hash: str


@dataclass
class Paired:
    outcomes: dict[str, Outcome]


@pytest.fixture(scope="module")
def paired() -> Iterator[Paired]:
    """The same signed transactions, each mined alone on anvil and on py-evm."""
    abi, bytecode = load_contract("TraceTarget")
    child_abi, _ = load_contract("Child")
    target_contract = Web3().eth.contract(abi=abi)
    child_contract = Web3().eth.contract(abi=child_abi)
    signer = Signer()
    target = signer.created_address(0)
    ours = PyEvmChain()
    outcomes: dict[str, Outcome] = {}
    with AnvilNode(chain_id=CHAIN_ID) as node:

        def send(name: str, raw: bytes) -> list[dict[str, Any]]:
            tx_hash = node.rpc("eth_sendRawTransaction", ["0x" + raw.hex()])
            receipt = None
            for _ in range(200):
                receipt = node.rpc("eth_getTransactionReceipt", [tx_hash])
                if receipt is not None:
                    break
                time.sleep(0.01)
            assert receipt is not None, f"anvil did not mine {name}"
            number = receipt["blockNumber"]
            anvil = node.rpc("trace_filter", [{"fromBlock": number, "toBlock": number}])
            records = ours.traces(raw)
            our_block = ours.chain.get_canonical_head()
            outcomes[name] = Outcome(anvil, receipt["blockHash"], records, "0x" + our_block.hash.hex())
            return records

        def deploy(runtime: str) -> str:
            address = signer.created_address(signer.nonce)
            send(f"deploy {runtime}", signer.sign(data="0x" + returning(runtime)))
            return address[2:]

        send("deploy", signer.sign(data=bytecode, gas=3_000_000))
        run = send("run", signer.sign(to=target, data=target_contract.encode_abi("run", [7]), value=5, gas=1_000_000))
        send("transfer", signer.sign(to=OTHER, value=1, gas=21_000))
        send("reverted", signer.sign(to=target, data=target_contract.encode_abi("requirePositive", [0]), gas=100_000))
        send("out_of_gas", signer.sign(to=target, data=target_contract.encode_abi("run", [8]), gas=60_000))
        send("failed_deploy", signer.sign(data="0x60006000fd", gas=100_000))
        # Root gasUsed is counted before the refund (clearing a slot) and before the EIP-7623 calldata floor.
        helper = "0x" + keccak(rlp.encode([bytes.fromhex(target[2:]), 1]))[12:].hex()
        helper_contract = Web3().eth.contract(abi=load_contract("Helper")[0])
        send("stored", signer.sign(to=helper, data=helper_contract.encode_abi("store", [5]), gas=100_000))
        send("cleared", signer.sign(to=helper, data=helper_contract.encode_abi("store", [0]), gas=100_000))
        send("data_transfer", signer.sign(to=OTHER, data="0x" + "ab" * 200, gas=100_000))
        # EIP-6780: a contract created in an earlier transaction self-destructs (its balance moves, it stays).
        [created2] = [r["result"]["address"] for r in run if r["action"].get("creationMethod") == "create2"]
        destroy = child_contract.encode_abi("destroy", [to_checksum_address(OTHER)])
        send("destroy_existing", signer.sign(to=created2, data=destroy, gas=100_000))
        funded = signer.created_address(signer.nonce)
        send("deploy funded selfdestruct", signer.sign(data="0x" + returning(SELFDESTRUCT_RUNTIME), value=9))
        send("selfdestruct_root", signer.sign(to=funded, gas=100_000))
        # Failures anvil words in revm's own names, and frames the EVM refused before running them.
        for name, initcode in [
            ("full_stack", "5f" * 1025),
            ("out_of_offset", "6001600060003e"),
            ("ef_code", "60ef60005360016000f3"),
            ("code_too_big", "6160016000f3"),
            ("deposit_out_of_gas", "6160006000f3"),
            ("invalid_opcode", "fe"),
            ("undefined_opcode", "0c"),
            ("bad_jump", "600456"),
            ("jump_into_push_data", "600356005b"),
            ("stack_underflow", "01"),
            ("refused_call", "5f5f5f5f600173" + OTHER_HEX + "5af100"),
            ("refused_create", "600060006001f000"),
            ("create2_collision", "5f5f5f5ff5505f5f5f5ff500"),
            ("identity_precompile", "5f5f5f5f5f60045af100"),
            ("precompile_out_of_gas", "60205f5f5f5f60046001f100"),
            ("bad_precompile_input", "60015f525f5f60205f5f60065af100"),
            ("callcode_with_value", "5f5f5f5f600173" + OTHER_HEX + "5af200"),
            ("delegatecall_to_account", "5f5f5f5f73" + OTHER_HEX + "5af400"),
        ]:
            gas = 60_000 if name == "deposit_out_of_gas" else 300_000
            value = 3 if name == "callcode_with_value" else 0
            send(name, signer.sign(data="0x" + initcode, gas=gas, value=value))
        sstore = deploy(SSTORE_RUNTIME)
        for name, runtime in [
            ("static_sstore", SSTORE_RUNTIME),
            ("static_log", LOG_RUNTIME),
            ("static_call_with_value", CALL_WITH_VALUE_RUNTIME),
            ("static_create", CREATE_RUNTIME),
            ("static_selfdestruct", SELFDESTRUCT_RUNTIME),
        ]:
            address = sstore if runtime == SSTORE_RUNTIME else deploy(runtime)
            send(name, signer.sign(data="0x" + call_code("fa", address)))
        send("sstore_sentry", signer.sign(data="0x" + call_code("f1", sstore, value=0, gas="6108fc")))
        yield Paired(outcomes)


EXPECTED_KINDS = {
    ("call", "call", None),
    ("call", "staticcall", None),
    ("call", "delegatecall", None),
    ("create", "create", None),
    ("create", "create2", None),
    ("call", "staticcall", "Reverted"),
    ("call", "call", "Out of gas"),
    ("suicide", None, None),
}


@pytest.mark.e2e
def test_records_equal_anvil_trace_filter(paired: Paired) -> None:
    """Every member equal for every transaction: structure, types, addresses, values, inputs, outputs, errors,
    gas (no figure differs, refund and calldata-floor cases included), subtraces, traceAddress, positions, and the
    transaction hashes (the same signed bytes). Block hashes differ between the chains (other headers), so each
    chain's records are held to its own block."""
    assert len(paired.outcomes) > 30
    for name, outcome in paired.outcomes.items():
        assert outcome.anvil, f"anvil has no traces for {name}"
        assert {r["blockHash"] for r in outcome.anvil} == {outcome.anvil_block_hash}, name
        assert {r["blockHash"] for r in outcome.ours} == {outcome.our_block_hash}, name
        anvil = [{**r, "blockHash": None} for r in outcome.anvil]
        ours = [{**r, "blockHash": None} for r in outcome.ours]
        assert ours == anvil, name


@pytest.mark.e2e
def test_run_covers_every_frame_kind(paired: Paired) -> None:
    records = paired.outcomes["run"].ours
    kinds = {
        (r["type"], r["action"].get("callType") or r["action"].get("creationMethod"), r.get("error")) for r in records
    }
    assert kinds == EXPECTED_KINDS
    assert max(len(r["traceAddress"]) for r in records) == 2


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("reverted", "Reverted"),
        ("out_of_gas", "Out of gas"),
        ("failed_deploy", "Reverted"),
        ("refused_call", None),
        ("static_call_with_value", None),
    ],
)
def test_top_level_outcomes(paired: Paired, name: str, error: str | None) -> None:
    root = paired.outcomes[name].ours[0]
    assert root.get("error") == error
