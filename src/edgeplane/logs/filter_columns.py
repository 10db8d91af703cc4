"""The filter compiled to Arrow: a checked filter turned, once, into a predicate over a whole block of log records.

Why Arrow compute: a per-record predicate (generated Python, ``tests.support.filter_compiler``, now a test oracle) is as
fast as hand-written Python, and that is its ceiling: every record costs a Python call, a dictionary look-up per field
and a Python comparison per condition, several times the target for a 30-operator filter (``docs/benchmarks.md``). No
Python code can go below that while it touches each record. The log store keeps records as Arrow record batches
(``edgeplane.logs.record_columns``), so a filter can instead be a handful of compute kernels per block: one C++ loop per
condition over a whole column (``equal``, ``less``, ``starts_with``, ``is_in``, ...) and one per ``and``/``or``, with no
Python object per record at all. Python's overhead is paid once per kernel and block, not once per record.

Semantics: exactly those of the reference interpreter (``edgeplane.logs.filter_interpreter``), mapped to columns:

- A field is missing from a record when its column is absent from the block (a block holds only the columns its
  records have), when the record's value is null, or when the column is not of an Arrow type the field's values can
  have (say a block whose types were inferred differently): such a column is treated as absent, as the interpreter
  treats a value of the wrong type. A list holding a null element is not a list of strings, so it is missing too.
  A loose column (each value's JSON text: records that did not fit the schema, ``record_columns.batch_of_any_rows``)
  is decided record by record by the interpreter, on its decoded values.
- Each positive operator is computed as a mask that is null where the field is missing; the nulls become ``false``
  (``fill_null``), and a negated operator is the inverse of that filled mask, so it is ``true`` where the field is
  missing. Every mask that leaves a condition, a group or the predicate has no nulls, so ``and``/``or`` are the plain
  Boolean kernels.
- Numbers compare as Python compares them: an integer column against a constant outside the 64-bit range, or against
  a float, compares exactly (the constant becomes an integer bound, or the condition folds to ``true``/``false``);
  ``in`` on a float column treats ``0.0`` and ``-0.0`` as equal, and a NaN in its set never matches, as in Python.
- A string constant that UTF-8 cannot encode (a lone surrogate) equals, starts, ends and is contained in no Arrow
  string, since Arrow strings are valid UTF-8.
- ``contains`` on a list is element membership and ``in`` is true when any element is in the set: the element
  matches are counted per list with a cumulative sum read at the list offsets, so lists stay vectorised too.

Evaluation order, the part that is more than a translation (all pure, so the order never changes a result):

- Conditions of a group run cheapest first, by an estimate of each kernel's cost per record (a number comparison
  costs about 1.5 ns, a string comparison 8, a substring search 50; ``in`` over a few numbers is a few comparisons,
  not a hash look-up).
- A group stops as soon as its mask is decided: an ``and`` with no record left, an ``or`` with every record in. A
  condition on an absent column is a constant, not a column of nulls.
- When few records are left undecided (an ``and`` after a selective first condition), the rest of the group runs on
  those records only: the columns it reads are selected for them (``RecordBatch.filter``), and its mask is written
  back (``replace_with_mask``). That costs about 40 ns per undecided record, so it is done only when the estimate
  says the rest of the group would cost more on the other records.

A type check guards every kernel; should a kernel still refuse a column, that condition is decided record by record
by the interpreter, as the per-record compiler falls back on it. So the predicate never raises on a record batch; it
is pure, and uses only single-threaded kernels (Arrow's thread pool stays unused), so it is safe to call from any
thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.logs.datasets import Dataset
from edgeplane.logs.filter_checker import checked_field, comparand
from edgeplane.logs.filter_interpreter import evaluate
from edgeplane.logs.filter_tree import NEGATED, Condition, Filter, Node, Operator
from edgeplane.logs.record_columns import is_loose, loose_values

ColumnPredicate: TypeAlias = Callable[[pa.RecordBatch], pa.BooleanArray]

Mask: TypeAlias = pa.BooleanArray | bool
"""A selection over one batch: an array without nulls, or ``True``/``False`` for every record alike."""

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_COMPARISONS: Final = {"eq": pc.equal, "lt": pc.less, "leq": pc.less_equal, "gt": pc.greater, "geq": pc.greater_equal}
# What a kernel costs per record, in nanoseconds, roughly as measured on one core (``bench/filter.py``): members of a
# group run cheapest first, and a group narrows to its undecided records when that saves more than it costs.
_COMPARE_COST: Final = 1.5  # a fixed-width comparison, one Boolean operation
_STRING_COSTS: Final[dict[Operator, float]] = {
    "eq": 8.0,
    "in": 13.0,
    "startsWith": 7.0,
    "endsWith": 7.0,
    "contains": 50.0,
}
_LIST_COST: Final = 15.0
_SELECT_COST: Final = 6.0  # selecting one record's value of a string or fixed-width column
_SELECT_LIST_COST: Final = 35.0
_WRITE_BACK_COST: Final = 35.0  # writing one undecided record's result back into the group's mask
_NARROW_FIXED_COST: Final = 15_000.0  # per narrowing, whatever the number of records
_SMALL_SET: Final = 8  # up to this many numbers, ``in`` is one comparison per number rather than a hash look-up


def compile_column_filter(tree: Filter, dataset: Dataset) -> ColumnPredicate:
    """A predicate giving, for a record batch of ``dataset``'s records, a mask without nulls that is true for the
    records ``tree`` passes: the selection of ``compile_filter`` applied to each record. Raises ``FilterError`` if
    ``tree`` is not valid for ``dataset``. The predicate never raises for a record batch (a column of an unexpected
    type counts as missing), is pure and safe to call from any thread."""
    plan = _plan(tree.where, "where", dataset)

    def column_predicate(batch: pa.RecordBatch) -> pa.BooleanArray:
        mask = plan.evaluate(batch)
        if isinstance(mask, bool):
            return _constant_mask(mask, batch.num_rows)
        return mask

    return column_predicate


class _Plan(Protocol):
    """A node of the filter, ready to run: its mask over a batch, its cost per record (nanoseconds), and the columns
    it reads with the cost per record of selecting each."""

    @property
    def cost(self) -> float: ...

    @property
    def columns(self) -> dict[str, float]: ...

    def evaluate(self, batch: pa.RecordBatch) -> Mask: ...


@dataclass(slots=True)
class _GroupPlan:
    kind: Literal["and", "or"]
    members: list[_Plan]  # cheapest first
    cost: float
    columns: dict[str, float]
    # For each member index: the cost per record and the columns of that member and all after it.
    cost_from: list[float]
    columns_from: list[dict[str, float]]

    def evaluate(self, batch: pa.RecordBatch) -> Mask:
        return self._from(0, batch)

    def _from(self, start: int, batch: pa.RecordBatch) -> Mask:
        """The group's mask over ``batch`` counting only the members from ``start`` on."""
        # An ``and`` is decided by a member that passes no record, an ``or`` by one that passes every record.
        decisive = self.kind == "or"
        combine = pc.and_ if self.kind == "and" else pc.or_
        rows = batch.num_rows
        combined: pa.BooleanArray | None = None
        for index in range(start, len(self.members)):
            if combined is not None:
                narrowed = self._narrowed(index, batch, combined)
                if narrowed is not None:
                    return narrowed
            mask = self.members[index].evaluate(batch)
            if isinstance(mask, bool):
                if mask is decisive:
                    return decisive
                continue
            combined = mask if combined is None else combine(combined, mask)
            if combined.true_count == (rows if decisive else 0):
                return decisive
        return not decisive if combined is None else combined

    def _narrowed(self, start: int, batch: pa.RecordBatch, combined: pa.BooleanArray) -> Mask | None:
        """The group's mask, given ``combined`` for the members before ``start``: the remaining members evaluated on
        the undecided records only (those ``combined`` passes for an ``and``, fails for an ``or``), with only the
        columns they read, and their mask written back at those records. ``None`` when that would not pay: when the
        selection and write-back of the undecided records cost more than the remaining members on the others."""
        rows = batch.num_rows
        undecided = rows - combined.true_count if self.kind == "or" else combined.true_count
        schema = batch.schema
        indices, select_cost = [], _WRITE_BACK_COST
        for name, cost in self.columns_from[start].items():
            if (index := schema.get_field_index(name)) >= 0:
                indices.append(index)
                select_cost += cost
        saved = (rows - undecided) * self.cost_from[start]
        if not indices or undecided * select_cost + _NARROW_FIXED_COST >= saved:
            return None
        keep = pc.invert(combined) if self.kind == "or" else combined
        rest = self._from(start, batch.select(indices).filter(keep))
        if isinstance(rest, bool):
            # and: none of the undecided pass (false), or all do (combined); or: all pass (true), or none do.
            return rest if rest is (self.kind == "or") else combined
        return pc.replace_with_mask(combined, keep, rest)


def _plan(node: Node, path: str, dataset: Dataset) -> _Plan:
    if isinstance(node, Condition):
        return _condition_plan(node, path, dataset)
    members: list[_Plan] = []
    for index, member in enumerate(node.members):
        plan = _plan(member, f"{path}.{node.kind}[{index}]", dataset)
        # Same-kind subgroups are spliced in (same meaning), so that all their members are ordered by cost together.
        if isinstance(plan, _GroupPlan) and plan.kind == node.kind:
            members.extend(plan.members)
        else:
            members.append(plan)
    if len(members) == 1:
        return members[0]
    members.sort(key=lambda plan: plan.cost)
    cost_from = [sum(plan.cost for plan in members[index:]) for index in range(len(members))]
    columns_from = [
        {name: cost for plan in members[index:] for name, cost in plan.columns.items()} for index in range(len(members))
    ]
    return _GroupPlan(node.kind, members, cost_from[0], columns_from[0], cost_from, columns_from)


# -- conditions ---------------------------------------------------------------------------------------------------

Kernel: TypeAlias = Callable[[pa.Array], Mask]
"""A positive operator over a column of the expected type: null where the value is null, or a constant."""


@dataclass(slots=True)
class _ConditionPlan:
    name: str
    normalise: Callable[[pa.Array], pa.Array | None]
    kernel: Kernel
    negated: bool
    cost: float
    columns: dict[str, float]
    condition: Condition
    dataset: Dataset

    def evaluate(self, batch: pa.RecordBatch) -> Mask:
        index = batch.schema.get_field_index(self.name)
        if index < 0:  # missing from every record
            return self.negated
        try:
            column = self.normalise(batch.column(index))
            if column is None and is_loose(batch.column(index)):  # values of any type: one by one
                return self._record_by_record(batch.column(index))
            if column is None:  # of a type the field's values never have: missing from every record
                return self.negated
            mask = self.kernel(column)
        except pa.ArrowException:
            # A layout no kernel here expected (the types are checked first, so this is not known to happen):
            # record by record, as the per-record compiler falls back to the interpreter, rather than raise.
            return self._record_by_record(batch.column(index))
        if isinstance(mask, bool):
            # A constant for the present values; a missing value stays false for a positive operator.
            if column.null_count == 0 or not mask:
                return mask != self.negated
            mask = pc.is_valid(column)
        elif mask.null_count:
            mask = mask.fill_null(False)
        return pc.invert(mask) if self.negated else mask

    def _record_by_record(self, column: pa.Array) -> Mask:
        tree, name, dataset = Filter(self.condition), self.name, self.dataset
        try:
            values = loose_values(column)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            return self.negated
        return pa.array([evaluate(tree, {name: value}, dataset) for value in values], pa.bool_())


def _condition_plan(condition: Condition, path: str, dataset: Dataset) -> _Plan:
    field = checked_field(condition, dataset, path)
    operator = condition.operator
    positive: Operator = NEGATED.get(operator, operator)
    value: Any = comparand(field, positive, condition.value, path)
    kind = field.type
    cost, select_cost = _COMPARE_COST, _SELECT_COST
    if kind == "string":
        normalise, kernel = _string_column, _string_kernel(positive, value)
        cost = _STRING_COSTS["eq" if positive == "in" and len(value) == 1 else positive]
    elif kind == "array_string":
        normalise, kernel = _list_column, _list_kernel(positive, value)
        cost, select_cost = _LIST_COST, _SELECT_LIST_COST
    elif kind == "bool":
        normalise, kernel = _bool_column, _bool_kernel(value)
    elif kind == "float":
        normalise, kernel = _float_column, _float_kernel(positive, value)
    else:  # int, timestamp
        normalise, kernel = _int_column, _int_kernel(positive, value)
    if kind in ("int", "timestamp", "float") and positive == "in":
        cost = _COMPARE_COST * len(value) if len(value) <= _SMALL_SET else _STRING_COSTS["in"]
    negated = operator in NEGATED
    return _ConditionPlan(field.name, normalise, kernel, negated, cost, {field.name: select_cost}, condition, dataset)


def _constant_mask(value: bool, length: int) -> pa.BooleanArray:
    mask: pa.BooleanArray = pa.repeat(pa.scalar(value, pa.bool_()), length)
    return mask


# -- strings --------------------------------------------------------------------------------------------------------


def _string_column(column: pa.Array) -> pa.Array | None:
    type_ = column.type
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return column
    if pa.types.is_dictionary(type_) and (
        pa.types.is_string(type_.value_type) or pa.types.is_large_string(type_.value_type)
    ):
        return column
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _string_kernel(operator: Operator, value: Any) -> Kernel:
    if operator == "in":
        members = sorted(item for item in value if _encodable(item))
        if len(members) == 1:
            return _string_kernel("eq", members[0])
        return _on_dictionary(_member_of(members, pa.string())) if members else _never
    if not _encodable(value):  # no valid UTF-8 string equals, starts, ends with or contains it
        return _never
    if operator == "eq":
        scalar = pa.scalar(value, pa.string())
        return _on_dictionary(lambda column: pc.equal(column, scalar))
    scan = {"startsWith": pc.starts_with, "endsWith": pc.ends_with, "contains": pc.match_substring}[operator]
    options = pc.MatchSubstringOptions(value)
    return _on_dictionary(lambda column: scan(column, options=options))


def _on_dictionary(kernel: Callable[[pa.Array], pa.BooleanArray]) -> Kernel:
    """``kernel`` for a plain string column; for a dictionary-encoded one, ``kernel`` over its distinct values, read
    through the indices (a null index stays null)."""

    def kernel_or_dictionary(column: pa.Array) -> Mask:
        if isinstance(column, pa.DictionaryArray):
            return pc.take(kernel(column.dictionary), column.indices)
        return kernel(column)

    return kernel_or_dictionary


def _member_of(members: list[Any], type_: pa.DataType) -> Callable[[pa.Array], pa.BooleanArray]:
    """Whether each value is one of ``members`` (not empty): a hash look-up, or for a few numbers one comparison per
    number, which is several times faster."""
    if len(members) > _SMALL_SET or not (pa.types.is_integer(type_) or pa.types.is_floating(type_)):
        options = pc.SetLookupOptions(pa.array(members, type_))
        return lambda column: pc.is_in(column, options=options)
    scalars = [pa.scalar(member, type_) for member in members]

    def any_equal(column: pa.Array) -> pa.BooleanArray:
        mask = pc.equal(column, scalars[0])
        for scalar in scalars[1:]:
            mask = pc.or_(mask, pc.equal(column, scalar))
        return mask

    return any_equal


def _never(column: pa.Array) -> Mask:
    return False


def _always(column: pa.Array) -> Mask:
    return True


# -- numbers and booleans ------------------------------------------------------------------------------------------


def _bool_column(column: pa.Array) -> pa.Array | None:
    return column if pa.types.is_boolean(column.type) else None


def _bool_kernel(value: bool) -> Kernel:
    return lambda column: column if value else pc.invert(column)


def _int_column(column: pa.Array) -> pa.Array | None:
    type_ = column.type
    if type_ == pa.int64():
        return column
    if pa.types.is_integer(type_) and type_ != pa.uint64():  # every value fits in int64
        return column.cast(pa.int64())
    return None


def _float_column(column: pa.Array) -> pa.Array | None:
    type_ = column.type
    if pa.types.is_floating(type_):
        return column if type_ == pa.float64() else column.cast(pa.float64())
    # A float field's value may be an int: Python compares it exactly, and so does the integer kernel.
    return _int_column(column)


def _float_kernel(operator: Operator, value: Any) -> Kernel:
    integer = _int_kernel(operator, value)
    if operator == "in":
        members = [item for item in value if not math.isnan(item)]  # NaN is never in a set, as in Python
        if 0.0 in members:  # -0.0 == 0.0 in Python, but Arrow's set look-up tells them apart (and so would a set)
            members += [0.0, -0.0]
        floating = _member_of(members, pa.float64()) if members else _never
    else:
        scalar, compare = pa.scalar(float(value), pa.float64()), _COMPARISONS[operator]
        floating = lambda column: compare(column, scalar)  # noqa: E731
    return lambda column: floating(column) if pa.types.is_floating(column.type) else integer(column)


def _int_kernel(operator: Operator, value: Any) -> Kernel:
    """The positive ``operator`` of an int64 column against ``value`` (an int of any size, or a float, or a set of
    them), compared exactly, as Python compares an int with an int or a float."""
    if operator == "in":
        members = {int(item) for item in value if _integral(item) and _INT64_MIN <= item <= _INT64_MAX}
        return _member_of(sorted(members), pa.int64()) if members else _never
    if isinstance(value, float) and math.isnan(value):
        return _never
    if operator == "eq":
        if not (_integral(value) and _INT64_MIN <= value <= _INT64_MAX):
            return _never
        return _compare(pc.equal, int(value))
    # For an integer v: v < x iff v < ceil(x), v <= x iff v <= floor(x), v > x iff v > floor(x), v >= x iff
    # v >= ceil(x); infinities become bounds just beyond the int64 range.
    rounded = _bound(value, up=operator in ("lt", "geq"))
    if operator in ("lt", "leq"):
        if rounded >= _INT64_MAX if operator == "leq" else rounded > _INT64_MAX:
            return _always
        if rounded < _INT64_MIN:
            return _never
    else:
        if rounded <= _INT64_MIN if operator == "geq" else rounded < _INT64_MIN:
            return _always
        if rounded > _INT64_MAX:
            return _never
    return _compare(_COMPARISONS[operator], rounded)


def _compare(compare: Callable[[pa.Array, pa.Scalar], pa.BooleanArray], bound: int) -> Kernel:
    scalar = pa.scalar(bound, pa.int64())
    return lambda column: compare(column, scalar)


def _integral(value: int | float) -> bool:
    return isinstance(value, int) or value.is_integer()


def _bound(value: int | float, *, up: bool) -> int:
    if isinstance(value, int):
        return value
    if math.isinf(value):
        return _INT64_MAX + 1 if value > 0 else _INT64_MIN - 1
    return math.ceil(value) if up else math.floor(value)


# -- lists of strings ----------------------------------------------------------------------------------------------


def _list_column(column: pa.Array) -> pa.Array | None:
    type_ = column.type
    if (pa.types.is_list(type_) or pa.types.is_large_list(type_)) and (
        pa.types.is_string(type_.value_type) or pa.types.is_large_string(type_.value_type)
    ):
        return column
    return None


def _list_kernel(operator: Operator, value: Any) -> Kernel:
    element = _string_kernel("eq" if operator == "contains" else "in", value)

    def any_element(column: pa.Array) -> Mask:
        assert isinstance(column, pa.ListArray | pa.LargeListArray)
        values = column.values
        matches = element(values)
        if isinstance(matches, bool):
            if not matches:
                return False
            matches = pc.is_valid(values)
        result = _any_per_list(column, matches)
        if values.null_count:  # a list with a null element is not a list of strings: the field is missing
            result = pc.and_(result, pc.invert(_any_per_list(column, pc.is_null(values))))
        return result

    return any_element


def _any_per_list(column: pa.ListArray | pa.LargeListArray, matches: pa.BooleanArray) -> pa.BooleanArray:
    """Per list of ``column``, whether ``matches`` (one per element of ``column.values``) is true for one of its
    elements; false for a null list."""
    if matches.null_count:
        matches = matches.fill_null(False)
    if matches.true_count == 0:
        return _constant_mask(False, len(column))
    counts = pc.cumulative_sum(matches.cast(pa.int64()))
    running = pa.concat_arrays([pa.array([0], pa.int64()), counts])
    offsets = column.offsets  # into column.values, also for a slice
    starts = pc.take(running, offsets.slice(0, len(column)))
    ends = pc.take(running, offsets.slice(1, len(column)))
    found = pc.greater(pc.subtract(ends, starts), 0)
    # A null list's offsets may span elements; a null list has none.
    return pc.and_(found, pc.is_valid(column)) if column.null_count else found
