"""Parity-style trace records of transactions run on py-evm, as anvil's native ``trace_filter`` lists them.

The development chain executes transactions with py-evm. Each executed transaction leaves a tree of computations
(``computation.children``); ``transaction_traces`` flattens that tree into the records of ``trace_filter``
(see ``edgeplane.jsonrpc.trace_records`` for the shapes): ``call`` records with ``callType``
``call|callcode|delegatecall|staticcall``, ``create`` records with ``creationMethod`` ``create|create2``, and
``suicide`` records, depth first, a frame before its children, a frame's ``suicide`` after its children.

Written by hand because nothing else does it: py-evm has no tracer, and the parity format is produced only inside
nodes (reth, anvil, erigon). The rules were taken from anvil 1.7.1's output, not from its source, and are held to
it by the differential test in ``tests/chain/test_call_traces.py``.

Why py-evm needs help (``tracing_vm_class``): a computation's message does not say which opcode made it (a
DELEGATECALL inside a static context looks like a STATICCALL; CREATE and CREATE2 messages are identical), the
balance a SELFDESTRUCT moved is gone once it ran, and calls the EVM refused before running (insufficient balance,
address collision) leave no computation at all, while anvil lists them. ``tracing_vm_class`` builds a VM class
whose CALL/CALLCODE/DELEGATECALL/STATICCALL/CREATE/CREATE2/SELFDESTRUCT opcodes note these facts on the
computations as they run. Other opcodes and value transfers without code are untouched, so a plain transfer
costs nothing extra.

anvil's rules, as observed:

- ``from`` of an inner frame is the calling contract (for DELEGATECALL too, not the caller's caller); ``to`` of a
  DELEGATECALL/CALLCODE is the code's address; a DELEGATECALL's ``value`` is the caller's own value.
- The root's ``gas`` is the gas limit minus intrinsic gas, and its ``gasUsed`` the execution gas before refunds and
  before the EIP-7623 calldata floor. For a creation, intrinsic gas includes the EIP-3860 initcode word cost, which
  py-evm charges inside the computation; it is taken out of both figures.
- A reverted frame keeps its result (gas used and the revert data as ``output`` or ``code``); any other failure
  has a null result. Error wording: "Reverted", "Out of gas" (also for the SSTORE 2300-gas sentry, code deposit and
  precompile gas), "Bad instruction", "Bad jump destination" (also for a jump into push data), "Out of stack",
  "Built-in failed", "Insufficient balance for transfer", and revm's own names where parity has no wording:
  "StackUnderflow", "OutOfOffset", "StateChangeDuringStaticCall", "CallNotAllowedInsideStatic",
  "CreateContractSizeLimit", "CreateContractStartingWithEF", "CreateCollision".
- A SELFDESTRUCT yields a ``suicide`` record (the balance it moved, before EIP-6780's rule decides whether the
  account goes) as the last child of the frame that ran it.

Remaining known differences to anvil:

- A DELEGATECALL or CALLCODE whose code address is an EIP-7702 delegated account names the delegation target as
  ``to``; py-evm's message keeps only the target, not the address the opcode named.
- Frames refused for call depth are worded "CallTooDeep" and for nonce overflow "NonceOverflow" (revm's names);
  neither is reachable on a chain with a 63/64 gas rule and realistic gas limits, so they were not checked.
- A CREATE or CREATE2 whose initcode exceeds the EIP-3860 limit fails its caller with "CreateInitCodeSizeLimit"
  (revm's name, not checked against anvil).
- If py-evm's intrinsic-gas check ever lets through a creation whose gas does not cover the initcode word cost
  (anvil rejects such a transaction), the root's figures are not adjusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from eth.abc import ComputationAPI, OpcodeAPI, SignedTransactionAPI, StateAPI, VirtualMachineAPI
from eth.constants import STACK_DEPTH_LIMIT, UINT_64_MAX
from eth.exceptions import (
    FullStack,
    Halt,
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
from eth.vm.computation import BaseComputation
from eth.vm.logic.call import BaseCall, CallParams
from eth.vm.logic.system import Create, CreateOpcodeStackData
from eth.vm.opcode_values import CALL, CALLCODE, CREATE, CREATE2, DELEGATECALL, SELFDESTRUCT, STATICCALL
from eth_typing import Address

TraceRecord = dict[str, Any]

_CALL_OPCODES = {CALL: "call", CALLCODE: "callcode", DELEGATECALL: "delegatecall", STATICCALL: "staticcall"}
_CREATE_OPCODES = {CREATE: "create", CREATE2: "create2"}
# Frames whose ``to`` is the code's address and whose ``from`` is the calling contract rather than msg.sender.
_CODE_ADDRESS_CALLS = frozenset({"callcode", "delegatecall"})

REVERTED = "Reverted"
OUT_OF_GAS = "Out of gas"
INSUFFICIENT_BALANCE = "Insufficient balance for transfer"
CALL_TOO_DEEP = "CallTooDeep"
NONCE_OVERFLOW = "NonceOverflow"
CREATE_COLLISION = "CreateCollision"
CALL_VALUE_IN_STATIC = "CallNotAllowedInsideStatic"

# py-evm exception -> anvil wording, for exceptions whose class alone decides it. Checked in order (subclasses
# first); plain VMError is what py-evm's precompiles raise on bad input.
_ERROR_WORDING: tuple[tuple[type[VMError], str], ...] = (
    (Revert, REVERTED),
    (InvalidJumpDestination, "Bad jump destination"),
    (InsufficientStack, "StackUnderflow"),
    (FullStack, "Out of stack"),
    (OutOfBoundsRead, "OutOfOffset"),
    (WriteProtection, "StateChangeDuringStaticCall"),
    (ReservedBytesInCode, "CreateContractStartingWithEF"),
    (VMError, "Built-in failed"),
)
# py-evm raises OutOfGas and InvalidInstruction for failures revm names apart; py-evm's message tells them apart.
_OUT_OF_GAS_MESSAGES: tuple[tuple[str, str], ...] = (
    ("Contract code size exceeds EIP170", "CreateContractSizeLimit"),
    ("Contract code size exceeds EIP-3860", "CreateInitCodeSizeLimit"),
)
_BAD_JUMP_MESSAGE = "Jump resulted in invalid instruction"


class UntracedComputation(TypeError):
    """The computation did not come from a VM built by ``tracing_vm_class``: the kinds of its frames are unknown."""


# ----------------------------------------------------------------------------------------------------------------
# Notes taken while the transaction runs


@dataclass(frozen=True, slots=True)
class RefusedFrame:
    """A call or creation the EVM refused before it ran (no computation exists), as anvil still lists it."""

    kind: str  # a callType or creationMethod
    sender: Address
    to: Address | None  # None for a creation
    value: int
    gas: int
    data: bytes  # call input or initcode
    error: str


class TracedComputation(BaseComputation):
    """The notes a traced computation carries; mixed in before the fork's own computation class.

    Class attributes are the defaults, so a computation that runs no tracked opcode costs nothing extra.
    """

    trace_kind: str | None = None  # callType or creationMethod, set by the opcode that started the frame
    trace_selfdestruct: tuple[Address, int] | None = None  # (beneficiary, balance moved)
    trace_error: str | None = None  # anvil's wording where the exception class does not tell it
    trace_refused: tuple[tuple[int, RefusedFrame], ...] = ()  # (number of children before it, frame)
    trace_initcode_gas = 0  # EIP-3860 initcode word cost charged in the root computation
    trace_call_params: CallParams | None = None  # of the CALL-family opcode running in this frame
    trace_child_gas = 0  # gas that opcode meant to give its child
    trace_create_data: CreateOpcodeStackData | None = None  # of the CREATE-family opcode running in this frame

    @classmethod
    def consume_initcode_gas_cost(cls, computation: ComputationAPI) -> None:
        before = computation.get_gas_remaining()
        try:
            super().consume_initcode_gas_cost(computation)
        finally:
            _notes(computation).trace_initcode_gas = before - computation.get_gas_remaining()


def _notes(computation: ComputationAPI) -> TracedComputation:
    return cast(TracedComputation, computation)


def _refuse(computation: ComputationAPI, frame: RefusedFrame) -> None:
    notes = _notes(computation)
    notes.trace_refused = (*notes.trace_refused, (len(computation.children), frame))


class _TracedCall(BaseCall):
    """Mixed in before a CALL-family opcode class: names the child frame, or notes the frame that was refused."""

    trace_kind = "call"

    def get_call_params(self, computation: ComputationAPI) -> CallParams:
        # The opcode class this mixin is put in front of implements it.
        params = super().get_call_params(computation)  # type: ignore[safe-super]
        _notes(computation).trace_call_params = params
        return params

    def compute_msg_gas(self, computation: ComputationAPI, gas: int, to: Address, value: int) -> tuple[int, int]:
        child_gas, fee = super().compute_msg_gas(computation, gas, to, value)
        _notes(computation).trace_child_gas = child_gas
        return child_gas, fee

    def __call__(self, computation: ComputationAPI) -> None:
        children = computation.children
        started = len(children)
        notes = _notes(computation)
        notes.trace_call_params = None
        try:
            super().__call__(computation)
        except WriteProtection:
            if self.trace_kind == "call":
                notes.trace_error = CALL_VALUE_IN_STATIC
            raise
        if len(children) > started:
            _notes(children[-1]).trace_kind = self.trace_kind
            return
        params = notes.trace_call_params
        if params is None:
            return
        # The opcode ran but started no frame: the EVM refused it (value above the balance, or call depth).
        _, value, to, _, code_address, input_start, input_size = params[:7]
        too_deep = computation.msg.depth + 1 > STACK_DEPTH_LIMIT
        _refuse(
            computation,
            RefusedFrame(
                kind=self.trace_kind,
                sender=computation.msg.storage_address,
                to=code_address if self.trace_kind in _CODE_ADDRESS_CALLS and code_address else to,
                value=value,
                gas=notes.trace_child_gas,
                data=_memory(computation, input_start, input_size),
                error=CALL_TOO_DEEP if too_deep else INSUFFICIENT_BALANCE,
            ),
        )


class _TracedCreate(Create):
    """Mixed in before a CREATE-family opcode class: names the child frame, or notes the creation that was refused.

    ``collision_gas`` holds the gas given to the latest creation; it is read back only when the creation found its
    address taken, and between setting and reading it no other code runs (chains of one traced class must not run
    in several threads at once, which py-evm chains do not support anyway).
    """

    trace_kind = "create"
    collision_gas = 0

    def get_stack_data(self, computation: ComputationAPI) -> CreateOpcodeStackData:
        data = super().get_stack_data(computation)
        _notes(computation).trace_create_data = data
        return data

    def max_child_gas_modifier(self, gas: int) -> int:
        child_gas = super().max_child_gas_modifier(gas)
        self.collision_gas = child_gas
        return child_gas

    def __call__(self, computation: ComputationAPI) -> None:
        children = computation.children
        started = len(children)
        notes = _notes(computation)
        notes.trace_create_data = None
        self.collision_gas = -1
        super().__call__(computation)
        if len(children) > started:
            _notes(children[-1]).trace_kind = self.trace_kind
            return
        data = notes.trace_create_data
        if data is None:
            return
        creator = computation.msg.storage_address
        if self.collision_gas >= 0:
            error, gas = CREATE_COLLISION, self.collision_gas
        else:
            # Refused before any gas went to the creation; anvil shows the gas it would have had.
            gas = self.max_child_gas_modifier(computation.get_gas_remaining())
            if computation.msg.depth + 1 > STACK_DEPTH_LIMIT:
                error = CALL_TOO_DEEP
            elif computation.state.get_balance(creator) < data.endowment:
                error = INSUFFICIENT_BALANCE
            elif computation.state.get_nonce(creator) + 1 > UINT_64_MAX:
                error = NONCE_OVERFLOW
            else:
                error = CREATE_COLLISION
        _refuse(
            computation,
            RefusedFrame(
                kind=self.trace_kind,
                sender=creator,
                to=None,
                value=data.endowment,
                gas=gas,
                data=_memory(computation, data.memory_start, data.memory_length),
                error=error,
            ),
        )


def _memory(computation: ComputationAPI, start: int, size: int) -> bytes:
    """Memory the refused opcode named; the opcode has already extended memory to cover it."""
    return computation.memory_read_bytes(start, size) if size else b""


class _TracedSelfdestruct(OpcodeAPI):
    """Wraps SELFDESTRUCT: notes the beneficiary and the balance moved when it succeeds."""

    def __init__(self, inner: OpcodeAPI) -> None:
        self._inner = inner
        self.mnemonic = getattr(inner, "mnemonic", "SELFDESTRUCT")
        self.gas_cost = getattr(inner, "gas_cost", 0)

    def __call__(self, computation: ComputationAPI) -> None:
        balance = computation.state.get_balance(computation.msg.storage_address)
        try:
            self._inner(computation=computation)
        except Halt:
            _notes(computation).trace_selfdestruct = (computation.beneficiaries[-1], balance)
            raise

    @classmethod
    def as_opcode(cls, logic_fn: Any, mnemonic: str, gas_cost: int) -> OpcodeAPI:
        raise NotImplementedError("wraps an existing opcode; build it with _TracedSelfdestruct(opcode)")


def _traced_opcodes(opcodes: dict[int, OpcodeAPI]) -> dict[int, OpcodeAPI]:
    traced = dict(opcodes)
    for value, kind in _CALL_OPCODES.items():
        traced[value] = _retyped(opcodes[value], _TracedCall, BaseCall, kind)
    for value, kind in _CREATE_OPCODES.items():
        traced[value] = _retyped(opcodes[value], _TracedCreate, Create, kind)
    traced[SELFDESTRUCT] = _TracedSelfdestruct(opcodes[SELFDESTRUCT])
    return traced


def _retyped(opcode: OpcodeAPI, mixin: type[Any], required: type[Any], kind: str) -> OpcodeAPI:
    """``opcode`` again, as an instance of a subclass of its own class with ``mixin`` in front."""
    opcode_class = type(opcode)
    if not issubclass(opcode_class, required):
        raise TypeError(f"cannot trace {opcode_class.__name__}: it is not a {required.__name__}")
    traced_class = type(f"Traced{opcode_class.__name__}", (mixin, opcode_class), {"trace_kind": kind})
    return cast(OpcodeAPI, traced_class())


def tracing_vm_class(base: type[VirtualMachineAPI]) -> type[VirtualMachineAPI]:
    """A subclass of the VM class ``base`` (a py-evm fork VM, Byzantium or later) whose computations carry what
    ``transaction_traces`` needs. Use it in the chain's ``vm_configuration`` in place of ``base``, e.g.
    ``MiningChain.configure(vm_configuration=((0, tracing_vm_class(PragueVM)),), chain_id=...)``.
    Execution results (state, receipts, gas) are those of ``base``. Raises TypeError if the fork's opcodes are not
    py-evm's CALL/CREATE opcode classes."""
    state_class = base.get_state_class()
    computation_class = state_class.computation_class
    traced_computation = type(
        f"Traced{computation_class.__name__}",
        (TracedComputation, computation_class),
        {"opcodes": _traced_opcodes(computation_class.opcodes)},
    )
    traced_state = type(f"Traced{state_class.__name__}", (state_class,), {"computation_class": traced_computation})
    vm_class = type(f"Traced{base.__name__}", (base,), {"_state_class": cast(type[StateAPI], traced_state)})
    return cast(type[VirtualMachineAPI], vm_class)


# ----------------------------------------------------------------------------------------------------------------
# Records


def transaction_traces(
    computation: ComputationAPI,
    *,
    transaction: SignedTransactionAPI,
    transaction_hash: str,
    transaction_position: int,
    block_hash: str,
    block_number: int,
) -> list[TraceRecord]:
    """The trace records of one executed transaction, depth first, as anvil's ``trace_filter`` gives them.

    ``computation`` is what ``MiningChain.apply_transaction(transaction)`` returned, on a chain whose VM came from
    ``tracing_vm_class``; the hashes are 0x-hex and are copied into every record. Raises ``UntracedComputation``
    for a computation from any other VM.
    """
    if not isinstance(computation, TracedComputation):
        raise UntracedComputation(
            f"{type(computation).__name__} was not built by tracing_vm_class; build the chain's VM with "
            "edgeplane.chain.call_traces.tracing_vm_class"
        )
    context: dict[str, Any] = {
        "blockHash": block_hash,
        "blockNumber": block_number,
        "transactionHash": transaction_hash,
        "transactionPosition": transaction_position,
    }
    records: list[TraceRecord] = []
    root_kind = "create" if computation.msg.is_create else "call"
    _add_frame(records, computation, root_kind, transaction.sender, [], context)
    root = records[0]
    # py-evm charges the initcode word cost inside the root computation; anvil counts it as intrinsic gas.
    initcode_gas = computation.trace_initcode_gas
    if initcode_gas:
        root["action"]["gas"] = hex(computation.msg.gas - initcode_gas)
        if root["result"] is not None:
            root["result"]["gasUsed"] = hex(computation.get_gas_used() - initcode_gas)
    return records


def _add_frame(
    records: list[TraceRecord],
    frame: TracedComputation,
    kind: str,
    caller: Address,
    trace_address: list[int],
    context: dict[str, Any],
) -> None:
    msg = frame.msg
    error = _error_wording(frame)
    record: TraceRecord
    if kind in _CREATE_OPCODES.values():
        action: dict[str, Any] = {
            "from": _address(msg.sender),
            "gas": hex(msg.gas),
            "init": _data(msg.code),
            "value": hex(msg.value),
            "creationMethod": kind,
        }
        result: dict[str, Any] | None = {
            "address": _address(msg.storage_address),
            "code": _data(frame.output),
            "gasUsed": hex(frame.get_gas_used()),
        }
        record_type = "create"
    else:
        action = {
            "from": _address(caller),
            "callType": kind,
            "gas": hex(msg.gas),
            "input": _data(msg.data),
            "to": _address(msg.code_address if kind in _CODE_ADDRESS_CALLS else msg.to),
            "value": hex(msg.value),
        }
        result = {"gasUsed": hex(frame.get_gas_used()), "output": _data(frame.output)}
        record_type = "call"
    if error is not None and error != REVERTED:
        result = None
    children = frame.children
    refused = frame.trace_refused
    selfdestruct = frame.trace_selfdestruct
    record = {"action": action, **_placed(context, error, result)}
    record["subtraces"] = len(children) + len(refused) + (selfdestruct is not None)
    record["traceAddress"] = trace_address
    record.update(_position(context, record_type))
    records.append(record)

    index = 0
    pending_refused = list(refused)
    for position, child in enumerate(children):
        while pending_refused and pending_refused[0][0] <= position:
            records.append(_refused_record(pending_refused.pop(0)[1], [*trace_address, index], context))
            index += 1
        child_notes = _notes(child)
        if child_notes.trace_kind is None:
            raise UntracedComputation("an inner frame was not started by a traced opcode")
        _add_frame(records, child_notes, child_notes.trace_kind, msg.storage_address, [*trace_address, index], context)
        index += 1
    for _, refused_frame in pending_refused:
        records.append(_refused_record(refused_frame, [*trace_address, index], context))
        index += 1
    if selfdestruct is not None:
        beneficiary, balance = selfdestruct
        suicide: TraceRecord = {
            "action": {
                "address": _address(msg.storage_address),
                "balance": hex(balance),
                "refundAddress": _address(beneficiary),
            },
            **_placed(context, None, None),
            "subtraces": 0,
            "traceAddress": [*trace_address, index],
        }
        suicide.update(_position(context, "suicide"))
        records.append(suicide)


def _refused_record(frame: RefusedFrame, trace_address: list[int], context: dict[str, Any]) -> TraceRecord:
    if frame.to is None:
        action: dict[str, Any] = {
            "from": _address(frame.sender),
            "gas": hex(frame.gas),
            "init": _data(frame.data),
            "value": hex(frame.value),
            "creationMethod": frame.kind,
        }
        record_type = "create"
    else:
        action = {
            "from": _address(frame.sender),
            "callType": frame.kind,
            "gas": hex(frame.gas),
            "input": _data(frame.data),
            "to": _address(frame.to),
            "value": hex(frame.value),
        }
        record_type = "call"
    record: TraceRecord = {"action": action, **_placed(context, frame.error, None)}
    record["subtraces"] = 0
    record["traceAddress"] = trace_address
    record.update(_position(context, record_type))
    return record


def _placed(context: dict[str, Any], error: str | None, result: dict[str, Any] | None) -> TraceRecord:
    """The members anvil lists between ``action`` and ``subtraces``, in its order."""
    placed: TraceRecord = {"blockHash": context["blockHash"], "blockNumber": context["blockNumber"]}
    if error is not None:
        placed["error"] = error
    placed["result"] = result
    return placed


def _position(context: dict[str, Any], record_type: str) -> TraceRecord:
    return {
        "transactionHash": context["transactionHash"],
        "transactionPosition": context["transactionPosition"],
        "type": record_type,
    }


def _error_wording(frame: TracedComputation) -> str | None:
    """anvil's ``error`` for a frame, or None if it succeeded."""
    if not frame.is_error:
        return None
    if frame.trace_error is not None:
        return frame.trace_error
    return error_wording(frame.error)


def error_wording(error: VMError) -> str:
    """anvil's (parity) wording for the py-evm exception that ended a frame."""
    message = str(error.args[0]) if error.args else ""
    if isinstance(error, OutOfGas):
        for prefix, wording in _OUT_OF_GAS_MESSAGES:
            if message.startswith(prefix):
                return wording
        return OUT_OF_GAS
    if isinstance(error, InvalidInstruction):
        return "Bad jump destination" if message == _BAD_JUMP_MESSAGE else "Bad instruction"
    for error_class, wording in _ERROR_WORDING:
        if isinstance(error, error_class):
            return wording
    return type(error).__name__


def _address(value: bytes) -> str:
    return "0x" + value.hex()


def _data(value: Any) -> str:
    return "0x" + bytes(value).hex()
