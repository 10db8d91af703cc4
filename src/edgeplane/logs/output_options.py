"""A job's output options, in both of their forms: the ``output_options`` object and the legacy ``logpull_options``
query string (``fields=A,B&timestamps=rfc3339&CVE-2021-44228=true``).

Each form is parsed into a typed value and validated against the dataset: every field name must be a field of the
dataset (an unknown one is an error that names it), listed at most once. Each can be derived from the other:
``logpull_options`` carries only the fields, the timestamp format, the CVE-2021-44228 flag and the sample rate, so
deriving it from ``output_options`` drops the other members (the output type, prefixes, suffixes, delimiters and
template), and deriving ``output_options`` from it gives those members their defaults.

Decisions (also in ``docs/logpush-filters.md``):

- An empty field list (``fields=`` or no ``field_names``) means every field of the dataset, in schema order.
- ``null`` for a member of ``output_options`` means its default, as if it were absent.
- ``record_prefix``/``record_suffix`` default to ``{`` and ``}\\n`` for ``ndjson`` and to ``""`` and ``\\n`` for
  ``csv``, whose records are not JSON objects.
- The misspelt ``CVE-2021-4428`` is accepted in both forms; given together with ``CVE-2021-44228``, the two must agree.
  The canonical spelling is the one written back.
- ``logpull_options`` may start with ``?``; its values are percent-decoded; ``sample`` (0..1) is the legacy spelling of
  ``sample_rate``; any other parameter is an error naming it.
- ``timestamp_format`` ``rfc3339ms`` and ``rfc3339ns`` are RFC 3339 in UTC with exactly three and nine fraction
  digits (``record_format`` writes them); ``logpull_options`` takes them in ``timestamps`` too.
- ``merge_subrequests`` is accepted for ``http_requests`` only (an error for another dataset, as on the real API)
  and kept; it is not part of ``logpull_options``. edgeplane's edge makes no subrequests (every record is a client's
  request), so there is nothing to merge and the output is the same either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal, cast, get_args
from urllib.parse import parse_qsl, quote

from edgeplane.logs.datasets import Dataset
from edgeplane.logs.errors import OutputOptionsError

TimestampFormat = Literal["unixnano", "unix", "rfc3339", "rfc3339ms", "rfc3339ns"]
OutputType = Literal["ndjson", "csv"]
TIMESTAMP_FORMATS: Final[tuple[str, ...]] = get_args(TimestampFormat)
OUTPUT_TYPES: Final[tuple[str, ...]] = get_args(OutputType)

CVE_MEMBER: Final = "CVE-2021-44228"
CVE_MEMBER_MISSPELT: Final = "CVE-2021-4428"
MERGE_SUBREQUESTS_DATASET: Final = "http_requests"

_RECORD_AFFIXES: Final[dict[str, tuple[str, str]]] = {"ndjson": ("{", "}\n"), "csv": ("", "\n")}
_TEXT_MEMBERS: Final = (
    "batch_prefix",
    "batch_suffix",
    "record_prefix",
    "record_suffix",
    "record_delimiter",
    "field_delimiter",
    "record_template",
)
_LOGPULL_PARAMETERS: Final = ("fields", "timestamps", "sample", CVE_MEMBER, CVE_MEMBER_MISSPELT)


@dataclass(frozen=True, slots=True)
class OutputOptions:
    """The ``output_options`` of a job, every member resolved to its value (defaults filled in)."""

    field_names: tuple[str, ...] = ()
    output_type: OutputType = "ndjson"
    batch_prefix: str = ""
    batch_suffix: str = ""
    record_prefix: str = "{"
    record_suffix: str = "}\n"
    record_delimiter: str = ""
    field_delimiter: str = ","
    record_template: str = ""
    sample_rate: float = 1.0
    timestamp_format: TimestampFormat = "unixnano"
    cve_2021_44228: bool = False
    merge_subrequests: bool = False

    def selected_fields(self, dataset: Dataset) -> tuple[str, ...]:
        """The fields to write: ``field_names``, or every field of ``dataset`` when it is empty."""
        return self.field_names or dataset.field_names

    def to_json(self) -> dict[str, Any]:
        """The object as the API returns it, every member present, the CVE flag under its canonical name."""
        return {
            "field_names": list(self.field_names),
            "output_type": self.output_type,
            **{name: getattr(self, name) for name in _TEXT_MEMBERS},
            "sample_rate": self.sample_rate,
            "timestamp_format": self.timestamp_format,
            "merge_subrequests": self.merge_subrequests,
            CVE_MEMBER: self.cve_2021_44228,
        }


@dataclass(frozen=True, slots=True)
class LogpullOptions:
    """The legacy ``logpull_options`` of a job."""

    fields: tuple[str, ...] = ()
    timestamps: TimestampFormat = "unixnano"
    sample: float = 1.0
    cve_2021_44228: bool = False

    def to_query(self) -> str:
        """The canonical query string: ``fields=...&timestamps=...``, then ``sample`` when not 1 and the CVE flag
        when set (``fields=A,B&timestamps=rfc3339&CVE-2021-44228=true``)."""
        parts = [f"fields={','.join(quote(name, safe='') for name in self.fields)}", f"timestamps={self.timestamps}"]
        if self.sample != 1.0:
            parts.append(f"sample={self.sample!r}")
        if self.cve_2021_44228:
            parts.append(f"{CVE_MEMBER}=true")
        return "&".join(parts)


def parse_output_options(value: Any, dataset: Dataset) -> OutputOptions:
    """The ``output_options`` object ``value`` (a decoded JSON object; ``None`` for all defaults), validated.

    Raises ``OutputOptionsError`` naming the member (``output_options.sample_rate``) for an unknown member, a value
    of the wrong type or out of range, a field name that is not a field of ``dataset``, or ``merge_subrequests`` on
    a dataset other than ``http_requests``.
    """
    if value is None:
        return OutputOptions()
    if not isinstance(value, dict):
        raise OutputOptionsError("output_options", "must be an object")
    known = {
        "field_names",
        "output_type",
        "sample_rate",
        "timestamp_format",
        "merge_subrequests",
        CVE_MEMBER,
        CVE_MEMBER_MISSPELT,
    }
    for name in value:
        if name not in known and name not in _TEXT_MEMBERS:
            raise OutputOptionsError(f"output_options.{name}", "unknown member")
    members = {name: item for name, item in value.items() if item is not None}

    names = members.get("field_names", [])
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise OutputOptionsError("output_options.field_names", "must be an array of field names")
    field_names = _checked_fields(names, dataset, "output_options.field_names")

    output_type = members.get("output_type", "ndjson")
    if output_type not in OUTPUT_TYPES:
        raise OutputOptionsError("output_options.output_type", f"must be one of {', '.join(OUTPUT_TYPES)}")
    prefix, suffix = _RECORD_AFFIXES[output_type]
    defaults = {"record_prefix": prefix, "record_suffix": suffix, "field_delimiter": ","}
    texts: dict[str, str] = {}
    for name in _TEXT_MEMBERS:
        text = members.get(name, defaults.get(name, ""))
        if not isinstance(text, str):
            raise OutputOptionsError(f"output_options.{name}", "must be a string")
        texts[name] = text

    sample_rate = _sample_rate(members.get("sample_rate", 1.0), "output_options.sample_rate")
    timestamp_format = members.get("timestamp_format", "unixnano")
    if timestamp_format not in TIMESTAMP_FORMATS:
        raise OutputOptionsError("output_options.timestamp_format", f"must be one of {', '.join(TIMESTAMP_FORMATS)}")
    flags: dict[str, bool] = {}
    for name in (CVE_MEMBER, CVE_MEMBER_MISSPELT):
        if name in members:
            if not isinstance(members[name], bool):
                raise OutputOptionsError(f"output_options.{name}", "must be true or false")
            flags[name] = members[name]
    merge_subrequests = members.get("merge_subrequests", False)
    if not isinstance(merge_subrequests, bool):
        raise OutputOptionsError("output_options.merge_subrequests", "must be true or false")
    if merge_subrequests and dataset.name != MERGE_SUBREQUESTS_DATASET:
        raise OutputOptionsError(
            "output_options.merge_subrequests", f"is supported only for the {MERGE_SUBREQUESTS_DATASET} dataset"
        )
    return OutputOptions(
        field_names=field_names,
        output_type=cast(OutputType, output_type),
        sample_rate=sample_rate,
        timestamp_format=cast(TimestampFormat, timestamp_format),
        cve_2021_44228=_one_flag(flags, "output_options"),
        merge_subrequests=merge_subrequests,
        **texts,
    )


def parse_logpull_options(text: str, dataset: Dataset) -> LogpullOptions:
    """The legacy query string ``text``, validated; ``""`` gives the defaults.

    Raises ``OutputOptionsError`` naming the parameter (``logpull_options.timestamps``) for an unknown or repeated
    parameter, a malformed value, or a field name that is not a field of ``dataset``.
    """
    if not isinstance(text, str):
        raise OutputOptionsError("logpull_options", "must be a string")
    query = text.removeprefix("?")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise OutputOptionsError("logpull_options", "must be a query string: name=value pairs joined by &") from None
    seen: dict[str, str] = {}
    for name, value in pairs:
        if name not in _LOGPULL_PARAMETERS:
            raise OutputOptionsError(
                f"logpull_options.{name}", f"unknown parameter; expected {', '.join(_LOGPULL_PARAMETERS[:4])}"
            )
        if name in seen:
            raise OutputOptionsError(f"logpull_options.{name}", "given more than once")
        seen[name] = value
    names = seen["fields"].split(",") if seen.get("fields") else []
    fields = _checked_fields(names, dataset, "logpull_options.fields")
    timestamps = seen.get("timestamps", "unixnano")
    if timestamps not in TIMESTAMP_FORMATS:
        raise OutputOptionsError("logpull_options.timestamps", f"must be one of {', '.join(TIMESTAMP_FORMATS)}")
    sample = 1.0
    if "sample" in seen:
        try:
            number = float(seen["sample"])
        except ValueError:
            raise OutputOptionsError("logpull_options.sample", "must be a number between 0 and 1") from None
        sample = _sample_rate(number, "logpull_options.sample")
    flags: dict[str, bool] = {}
    for name in (CVE_MEMBER, CVE_MEMBER_MISSPELT):
        if name in seen:
            if seen[name] not in ("true", "false"):
                raise OutputOptionsError(f"logpull_options.{name}", "must be true or false")
            flags[name] = seen[name] == "true"
    return LogpullOptions(
        fields=fields,
        timestamps=cast(TimestampFormat, timestamps),
        sample=sample,
        cve_2021_44228=_one_flag(flags, "logpull_options"),
    )


def output_options_from_logpull(options: LogpullOptions) -> OutputOptions:
    """The ``output_options`` equivalent to ``options``; members it cannot express take their defaults."""
    return OutputOptions(
        field_names=options.fields,
        timestamp_format=options.timestamps,
        sample_rate=options.sample,
        cve_2021_44228=options.cve_2021_44228,
    )


def logpull_options_from_output(options: OutputOptions) -> LogpullOptions:
    """The ``logpull_options`` closest to ``options``: fields, timestamp format, sample rate and CVE flag; the
    members the legacy form cannot express are dropped."""
    return LogpullOptions(
        fields=options.field_names,
        timestamps=options.timestamp_format,
        sample=options.sample_rate,
        cve_2021_44228=options.cve_2021_44228,
    )


def _checked_fields(names: list[str], dataset: Dataset, member: str) -> tuple[str, ...]:
    seen: set[str] = set()
    for position, name in enumerate(names):
        if not name:
            raise OutputOptionsError(member, f"field name {position + 1} is empty")
        if dataset.field(name) is None:
            raise OutputOptionsError(member, f"unknown field {name!r}; dataset {dataset.name} has no such field")
        if name in seen:
            raise OutputOptionsError(member, f"field {name} is listed more than once")
        seen.add(name)
    return tuple(names)


def _sample_rate(value: Any, member: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OutputOptionsError(member, "must be a number between 0 and 1")
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise OutputOptionsError(member, f"must be between 0 and 1, not {value!r}")
    return float(value)


def _one_flag(flags: dict[str, bool], form: str) -> bool:
    if len(set(flags.values())) > 1:
        raise OutputOptionsError(f"{form}.{CVE_MEMBER_MISSPELT}", f"contradicts {CVE_MEMBER}")
    return next(iter(flags.values()), False)
