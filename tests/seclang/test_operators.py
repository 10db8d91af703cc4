"""SecLang operators as ModSecurity v3.0.9 evaluates them: a table of operator, argument, value and captures."""

from __future__ import annotations

from pathlib import Path

import libinjection  # type: ignore[import-not-found]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pcre import MEANING  # PCRE's meaning, checked here against libmodsecurity's PCRE2

from edgeplane.seclang.errors import OperatorArgumentError, UnsupportedOperator
from edgeplane.seclang.operators import (
    OPERATOR_NAMES,
    Operator,
    byte_range,
    compile_operator,
    compile_phrases,
    pm_file_phrases,
    pm_phrases,
)
from edgeplane.seclang.rule_files import SecRule, load_rule_files
from tests.support.modsecurity import ModSecurity

CRS_RULES = Path("/usr/share/modsecurity-crs/rules")
HERE = Path(__file__).parent


def run(name: str, argument: str, value: bytes, data_dir: Path = HERE) -> tuple[bytes, ...] | None:
    return compile_operator(name, argument, data_dir=data_dir)(value)


# operator, argument, value, captures (None: no match)
TABLE: list[tuple[str, str, bytes, tuple[bytes, ...] | None]] = [
    # @rx: a search, TX:0 the match, TX:1.. the groups
    ("rx", "a(b)c", b"xabcx", (b"abc", b"b")),
    ("rx", "^GET$", b"POST", None),
    ("RX", "(?i)select", b"SeLeCt", (b"SeLeCt",)),
    # @pm: phrases, case-insensitive, the phrase as written
    ("pm", "Select union", b"1 UNION 2", (b"union",)),
    ("pm", "AppleWebKit Android", b"Mozilla (Linux; Android 10)", (b"Android",)),
    ("pm", "foo", b"fo", None),
    ("pm", "(", b"f(x)", (b"(",)),
    ("pm", '"a b"', b"xb", (b"b",)),
    ("pm", "caf\u00e9", "CAF\u00c9 caf\u00e9".encode(), ("caf\u00e9".encode(),)),
    ("pm", "caf\u00e9", "CAF\u00c9".encode(), None),  # bytes above 0x7F are compared as they are
    # @detectSQLi: the fingerprint; @detectXSS
    ("detectSQLi", "", b"1' or '1'='1", (b"s&sos",)),
    ("detectSQLi", "", b"1 union select 1", (b"1UE1",)),
    ("detectSQLi", "", b"hello world", None),
    ("detectSQLi", "", b"", None),
    ("detectXSS", "", b"<script>alert(1)</script>", (b"<script>alert(1)</script>",)),
    ("detectXSS", "", b"<b>bold</b> is fine", None),
    ("detectXSS", "", b"\xff<script>", (b"\xff<script>",)),
    # @validateByteRange: a byte outside the ranges matches
    ("validateByteRange", "32-126", b"abc", None),
    ("validateByteRange", "32-126", b"ab\x01", (b"ab\x01",)),
    ("validateByteRange", "1-255", b"a\x00", (b"a\x00",)),
    ("validateByteRange", "9,10,13,32-126,128-255", b"a\tb\xff", None),
    ("validateByteRange", "9, 10, 32-126", b"a\nb", None),
    ("validateByteRange", "38,44-46,48-58,61,65-90,95,97-122", b"a=b", None),
    ("validateByteRange", "38,44-46,48-58,61,65-90,95,97-122", b"a b", (b"a b",)),
    ("validateByteRange", "32-126", b"", None),
    # @validateUrlEncoding: a '%' without two hex digits after it
    ("validateUrlEncoding", "", b"a%41b%2f", None),
    ("validateUrlEncoding", "", b"plain", None),
    ("validateUrlEncoding", "", b"", None),
    ("validateUrlEncoding", "", b"100%", (b"100%",)),
    ("validateUrlEncoding", "", b"%4", (b"%4",)),
    ("validateUrlEncoding", "", b"%zz", (b"%zz",)),
    ("validateUrlEncoding", "", b"%4g", (b"%4g",)),
    ("validateUrlEncoding", "", b"%%41", (b"%%41",)),
    ("validateUrlEncoding", "", b"%41%", (b"%41%",)),
    # @validateUtf8Encoding: RFC 3629, except that F4 90.. (above U+10FFFF) passes as in ModSecurity
    ("validateUtf8Encoding", "", b"ascii", None),
    ("validateUtf8Encoding", "", "caf\u00e9 \u20ac \U0001f600".encode(), None),
    ("validateUtf8Encoding", "", b"\xc3", (b"\xc3",)),  # truncated
    ("validateUtf8Encoding", "", b"\xe2\x82", (b"\xe2\x82",)),  # truncated
    ("validateUtf8Encoding", "", b"\xc0\xaf", (b"\xc0\xaf",)),  # overlong
    ("validateUtf8Encoding", "", b"\xe0\x80\xaf", (b"\xe0\x80\xaf",)),  # overlong
    ("validateUtf8Encoding", "", b"\xf0\x80\x80\xaf", (b"\xf0\x80\x80\xaf",)),  # overlong
    ("validateUtf8Encoding", "", b"\xed\xa0\x80", (b"\xed\xa0\x80",)),  # a surrogate
    ("validateUtf8Encoding", "", b"\xf4\x90\x80\x80", None),  # above U+10FFFF: not checked
    ("validateUtf8Encoding", "", b"\xf5\x80\x80\x80", (b"\xf5\x80\x80\x80",)),
    ("validateUtf8Encoding", "", b"a\x80", (b"a\x80",)),  # a continuation byte first
    ("validateUtf8Encoding", "", b"\xc3\x28", (b"\xc3\x28",)),  # a bad continuation
    ("validateUtf8Encoding", "", b"\xff", (b"\xff",)),
    # @within: the value is a substring of the argument; an empty value is within anything
    ("within", "GET HEAD POST OPTIONS", b"GET", (b"GET",)),
    ("within", "GET HEAD POST OPTIONS", b"PUT", None),
    ("within", "GET HEAD POST OPTIONS", b"T HE", (b"T HE",)),
    ("within", "GET HEAD POST OPTIONS", b"", (b"",)),
    ("within", "", b"", (b"",)),
    ("within", "", b"x", None),
    # strings, case-sensitive
    ("streq", "POST", b"POST", (b"POST",)),
    ("streq", "POST", b"post", None),
    ("streq", "", b"", (b"",)),
    ("beginsWith", "/admin", b"/admin/x", (b"/admin",)),
    ("beginsWith", "/admin", b"/adm", None),
    ("beginsWith", "", b"x", (b"",)),
    ("endsWith", ".php", b"index.php", (b".php",)),
    ("endsWith", ".php", b"index.PHP", None),
    ("contains", "..", b"a/../b", (b"..",)),
    ("contains", "..", b"a/./b", None),
    ("contains", "", b"", (b"",)),
    # @containsWord: no ASCII letter on either side; digits and '_' are boundaries
    ("containsWord", "select", b"a select b", (b"select",)),
    ("containsWord", "select", b"selection", None),
    ("containsWord", "select", b"1select_", (b"select",)),
    ("containsWord", "select", b"select", (b"select",)),
    ("containsWord", "select", b"select x", (b"select",)),
    ("containsWord", "select", b"x select", (b"select",)),
    ("containsWord", "select", b"xselect select", (b"select",)),
    ("containsWord", "select", b"", None),
    ("containsWord", "", b"", (b"",)),
    # numbers: @eq with std::stoi (0 where it throws), the others with atoll
    ("eq", "0", b"0", (b"0",)),
    ("eq", "0", b"", (b"",)),
    ("eq", "0", b"abc", (b"abc",)),
    ("eq", "5", b" 5", (b" 5",)),
    ("eq", "5", b"5abc", (b"5abc",)),
    ("eq", "5", b"+5", (b"+5",)),
    ("eq", "0", b"99999999999", (b"99999999999",)),  # out of int range: stoi throws, 0
    ("eq", "1", b"0x1", None),
    ("eq", "-1", b"-1", (b"-1",)),
    ("eq", "x", b"0", (b"0",)),
    ("gt", "5", b"6", (b"6",)),
    ("gt", "5", b"5", None),
    ("gt", "5", b"99999999999999999999999", (b"99999999999999999999999",)),  # clamped, not wrapped
    ("gt", "5", b"abc", None),
    ("ge", "5", b"5", (b"5",)),
    ("ge", "5", b"4", None),
    ("lt", "0", b"-3", (b"-3",)),
    ("lt", "5", b"10", None),
    ("lt", "1", b"", (b"",)),
    ("le", "5", b"5", (b"5",)),
    ("le", "5", b"6", None),
    # @ipMatch: addresses and networks, IPv4 and IPv6
    ("ipMatch", "127.0.0.1,::1", b"127.0.0.1", (b"127.0.0.1",)),
    ("ipMatch", "127.0.0.1,::1", b"::1", (b"::1",)),
    ("ipMatch", "127.0.0.1,::1", b"127.0.0.2", None),
    ("ipMatch", "10.0.0.0/8,192.168.1.0/24", b"10.200.3.4", (b"10.200.3.4",)),
    ("ipMatch", "10.0.0.0/8,192.168.1.0/24", b"192.168.2.1", None),
    ("ipMatch", "2001:db8::/32", b"2001:db8::7", (b"2001:db8::7",)),
    ("ipMatch", "2001:db8::/32", b"2001:db9::7", None),
    ("ipMatch", "10.0.0.0/8", b"::ffff:10.0.0.1", None),  # families do not cross
    ("ipMatch", "10.0.0.0/8", b"not an address", None),
    ("ipMatch", "10.0.0.0/8", b" 10.0.0.1", None),
    ("ipMatch", "10.0.0.0/8", b"", None),
    ("ipMatch", "fe80::/10", b"fe80::1%eth0", None),
    # always, never
    ("unconditionalMatch", "", b"x", (b"x",)),
    ("noMatch", "", b"x", None),
    ("rbl", "sbl-xbl.spamhaus.org", b"127.0.0.2", None),
    ("geoLookup", "", b"8.8.8.8", None),
]


@pytest.mark.parametrize(("name", "argument", "value", "captures"), TABLE)
def test_operator(name: str, argument: str, value: bytes, captures: tuple[bytes, ...] | None) -> None:
    assert run(name, argument, value) == captures


@pytest.mark.parametrize(
    ("argument", "phrases"),
    [
        ("a b\tc", [b"a", b"b", b"c"]),
        ('"a b"', [b"a", b"b"]),
        ('  "a"', [b"a"]),
        (r"a\:b", [b"a:bb"]),  # escapes decode over the original, whose tail stays (ModSecurity's quirk)
        (r"a\\b c", [b"a\\b", b"cc"]),
        (r"a\xb", [b"a\\xb"]),  # an unsupported escape: the argument as written
        ("a|41|b", [b"ab41|b"]),  # inside |..| only the letters a-f count as hex digits
        ("|AB|", [b"\xabAB|"]),
        ('""', [b'""']),
        ("", []),
    ],
)
def test_pm_argument(argument: str, phrases: list[bytes]) -> None:
    assert pm_phrases(argument.encode()) == phrases


def test_pm_from_file(tmp_path: Path) -> None:
    (tmp_path / "list.data").write_bytes(b"# a comment\n\n  # indented comment\nfoo\n  bar\nBaz\r\nwith # hash\n")
    assert pm_file_phrases(tmp_path / "list.data") == [b"foo", b"  bar", b"Baz\r", b"with # hash"]
    for name in ("pmFromFile", "pmf", "PMFROMFILE"):
        assert run(name, "list.data", b"xFOOx", tmp_path) == (b"foo",)
        assert run(name, "list.data", b"x bar", tmp_path) is None
        assert run(name, "list.data", b"with # hash", tmp_path) == (b"with # hash",)
    assert run("pmFromFile", str(tmp_path / "list.data"), b"foo", Path("/nonexistent")) == (b"foo",)
    assert run("pmFromFile", "list.data", b"comment", tmp_path) is None


# phrases, value, what ModSecurity 3.0.9 stores in TX:0 (None: no match); checked against libmodsecurity below
PM_AUTOMATON = [
    ("ab abc b", b"xabcd", b"ab"),  # the first phrase to end
    ("a aa cacc", b"aaccc", b"a"),
    ("b ccbc", b"ccbA", None),  # "b" begins inside "ccb": the one-step failure link loses it
    ("aaba baab bc", b"cAAbcbb", None),
    ("b ccbc", b"xbx", b"b"),
    ("Android", b"Mozilla (Linux; ANDROID 10)", b"Android"),  # the node's text as the phrase wrote it
]


@pytest.mark.parametrize(("phrases", "value", "stored"), PM_AUTOMATON)
def test_pm_follows_modsecurity_automaton(phrases: str, value: bytes, stored: bytes | None) -> None:
    assert run("pm", phrases, value) == (None if stored is None else (stored,))


def test_ip_match_from_file(tmp_path: Path) -> None:
    (tmp_path / "ips.data").write_bytes(b"# blocked\n192.0.2.0/24\n\n2001:db8::1\n")
    assert run("ipMatchFromFile", "ips.data", b"192.0.2.9", tmp_path) == (b"192.0.2.9",)
    assert run("ipMatchF", "ips.data", b"2001:db8::1", tmp_path) == (b"2001:db8::1",)
    assert run("ipMatchFromFile", "ips.data", b"198.51.100.1", tmp_path) is None


@pytest.mark.parametrize(
    ("argument", "allowed"),
    [
        ("32-126", bytes(range(32, 127))),
        ("10, 13", b"\n\r"),
        ("1-3,abc,7", b"\x01\x02\x03\x07"),  # a part that is no number is skipped, as ModSecurity ignores it
        ("5-2,300,256-300", b""),  # out of order or out of range: skipped
        ("0", b"\x00"),
    ],
)
def test_byte_range(argument: str, allowed: bytes) -> None:
    assert byte_range(argument.encode()) == allowed


@pytest.mark.parametrize(
    ("name", "argument"),
    [
        ("ipMatch", "not-an-ip"),
        ("ipMatch", "10.0.0.0/33"),
        ("pmFromFile", "missing.data"),
        ("pmFromFile", "https://example.com/list.data"),
        ("pmFromFile", ""),
        ("rx", "(unclosed"),
        ("rx", r"\p{Lu}"),
    ],
)
def test_bad_arguments(name: str, argument: str) -> None:
    with pytest.raises(OperatorArgumentError):
        compile_operator(name, argument, data_dir=HERE)


@pytest.mark.parametrize("name", ["verifyCC", "inspectFile", "fuzzyHash", "nonsense"])
def test_unsupported_operators(name: str) -> None:
    with pytest.raises(UnsupportedOperator):
        compile_operator(name, "x", data_dir=HERE)


@given(st.binary(max_size=40))
def test_utf8_validation_agrees_with_python_where_rfc_3629_applies(value: bytes) -> None:
    try:
        value.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    beyond_unicode = any(value[index] == 0xF4 and value[index + 1] >= 0x90 for index in range(len(value) - 1))
    if not beyond_unicode:
        assert (run("validateUtf8Encoding", "", value) is None) == valid


@given(st.binary(max_size=30), st.lists(st.binary(min_size=1, max_size=4), min_size=1, max_size=5))
def test_phrases_found_are_in_the_value(value: bytes, phrases: list[bytes]) -> None:
    found = compile_phrases(phrases)(value)
    if found is not None:
        assert found[0].lower() in value.lower()
        assert any(phrase.lower() in value.lower() for phrase in phrases)
    if any(phrase.lower() in value.lower() for phrase in phrases if len(phrase) == 1):
        assert found is not None  # a one-byte phrase is a child of the root: never missed


class _Encoded:
    """What libinjection-python's functions encode: here, bytes as they are."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def encode(self, *args: object) -> bytes:
        return self.data


_SQL_PIECES = [b"1", b"'", b'"', b" ", b"or", b"and", b"union", b"select", b"=", b"--", b"/*", b"(", b")", b"a", b"#"]


@given(st.one_of(st.binary(max_size=40), st.lists(st.sampled_from(_SQL_PIECES), max_size=10).map(b"".join)))
def test_detect_sqli_agrees_with_libinjection_python(value: bytes) -> None:
    result = libinjection.is_sql_injection(_Encoded(value))
    expected = (str(result["fingerprint"]).encode(),) if result["is_sqli"] else None
    assert run("detectSQLi", "", value) == expected


@pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")
def test_every_crs_operator_compiles() -> None:
    seen: set[str] = set()
    for directive in load_rule_files(sorted(CRS_RULES.glob("REQUEST-9*.conf"))):
        rule: SecRule | None = directive if isinstance(directive, SecRule) else None
        while rule is not None:
            seen.add(rule.operator.lower())
            if "%{" not in rule.operator_argument:  # macros are expanded by the engine at run time
                compile_operator(rule.operator, rule.operator_argument, data_dir=CRS_RULES)
            rule = rule.chained_rule
    assert seen <= OPERATOR_NAMES


# --- differential: libmodsecurity 3.0.9 -----------------------------------------------------------------------------


class OperatorOracle:
    """libmodsecurity as an oracle for operators: ``run(name, argument, value)`` evaluates ``@name argument`` on
    ``value`` (sent as a request header) in a one-rule configuration with ``capture``, and gives TX:0 as the rule's
    log message shows it, or None when the rule did not match."""

    def __init__(self, modsecurity: ModSecurity) -> None:
        self._modsecurity = modsecurity

    def run(self, name: str, argument: str, value: bytes) -> bytes | None:
        quoted = argument.replace('\\"', '"').replace('"', '\\"')
        rule = (
            f'SecRule REQUEST_HEADERS:x "@{name} {quoted}" "id:1,phase:1,pass,log,capture,t:none,msg:\'<%{{TX.0}}>\'"'
        )
        outcome = self._modsecurity.rules("SecRuleEngine On\n" + rule).process_request(b"GET", b"/", [(b"x", value)])
        message = outcome.message(1)
        return None if message is None else message[1:-1]  # the <...> the message wraps TX:0 in


@pytest.fixture(scope="module")
def libmodsecurity(reference_modsecurity: ModSecurity) -> OperatorOracle:
    return OperatorOracle(reference_modsecurity)


_WITHOUT_ARGUMENT = {"detectsqli", "detectxss", "validateurlencoding", "validateutf8encoding", "unconditionalmatch"}


def _agree(oracle: OperatorOracle, name: str, argument: str, value: bytes, data_dir: Path = HERE) -> None:
    expected = oracle.run(name, argument, value)
    captures = run(name, argument, value, data_dir)
    assert (captures is None) == (expected is None), (name, argument, value, expected)
    printable = captures is not None and all(0x20 <= byte < 0x7F and byte != 0x5C for byte in captures[0])
    if printable and name.lower() in ("rx", "pm", "pmfromfile"):  # the log escapes other bytes
        assert captures is not None
        assert captures[0] == expected, (name, argument, value)


@pytest.mark.parametrize(("pattern", "matching", "other"), [row for row in MEANING if b'"' not in row[0]])
def test_pcre_meaning_agrees_with_libmodsecurity(
    libmodsecurity: OperatorOracle, pattern: bytes, matching: list[bytes], other: list[bytes]
) -> None:
    for value in matching + other:
        _agree(libmodsecurity, "rx", pattern.decode("utf-8", "surrogateescape"), value)


@pytest.mark.parametrize(("phrases", "value", "stored"), PM_AUTOMATON)
def test_pm_table_agrees_with_libmodsecurity(
    libmodsecurity: OperatorOracle, phrases: str, value: bytes, stored: bytes | None
) -> None:
    assert libmodsecurity.run("pm", phrases, value) == stored


@pytest.mark.parametrize(("name", "argument", "value", "captures"), TABLE)
def test_table_agrees_with_libmodsecurity(
    libmodsecurity: OperatorOracle, name: str, argument: str, value: bytes, captures: tuple[bytes, ...] | None
) -> None:
    if name.lower() in ("rbl", "geolookup"):
        return  # not evaluated without a resolver or database
    if not argument and name.lower() not in _WITHOUT_ARGUMENT:
        return  # ModSecurity's rule syntax wants an argument there
    if '"' in argument:
        return  # a quote ending the argument trips ModSecurity's rule lexer
    _agree(libmodsecurity, name, argument, value)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text("abcAB", min_size=1, max_size=5), min_size=1, max_size=5),
    st.lists(st.text("abcAB ", max_size=10).map(str.encode), min_size=1, max_size=8),
)
def test_pm_agrees_with_libmodsecurity(libmodsecurity: OperatorOracle, phrases: list[str], values: list[bytes]) -> None:
    for value in values:
        _agree(libmodsecurity, "pm", " ".join(phrases), value)


_BYTES = st.binary(max_size=12) | st.lists(st.sampled_from([b"%", b"4", b"1", b"g", b"\xc3", b"\xa9", b"\xf4\x90"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(_BYTES.map(lambda value: value if isinstance(value, bytes) else b"".join(value)), max_size=10))
def test_validators_agree_with_libmodsecurity(libmodsecurity: OperatorOracle, values: list[bytes]) -> None:
    for value in values:
        _agree(libmodsecurity, "validateUrlEncoding", "", value)
        _agree(libmodsecurity, "validateUtf8Encoding", "", value)
        _agree(libmodsecurity, "validateByteRange", "9,10,13,32-126", value)


_NUMBERS = st.sampled_from([b"0", b"1", b"-1", b"+7", b" 12", b"12abc", b"abc", b"", b"4294967296", b"2147483648"])


@settings(max_examples=100, deadline=None)
@given(_NUMBERS, _NUMBERS)
def test_numbers_agree_with_libmodsecurity(libmodsecurity: OperatorOracle, argument: bytes, value: bytes) -> None:
    if not argument.strip() or argument != argument.strip():
        return  # the rule text cannot carry an empty or space-led argument
    for name in ("eq", "ge", "gt", "lt", "le"):
        _agree(libmodsecurity, name, argument.decode(), value)


_WORDS = st.lists(st.sampled_from([b"select", b"sel", b"x", b" ", b"_", b"1", b"SELECT", b"-"]), max_size=6)


@settings(max_examples=100, deadline=None)
@given(_WORDS.map(b"".join))
def test_strings_agree_with_libmodsecurity(libmodsecurity: OperatorOracle, value: bytes) -> None:
    for name in ("containsWord", "contains", "beginsWith", "endsWith", "streq", "within"):
        _agree(libmodsecurity, name, "select", value)


def _crs_operators() -> list[tuple[str, str]]:
    operators: set[tuple[str, str]] = set()
    for directive in load_rule_files(sorted(CRS_RULES.glob("REQUEST-9*.conf"))):
        rule: SecRule | None = directive if isinstance(directive, SecRule) else None
        while rule is not None:
            name = rule.operator.lower()
            if name not in ("unconditionalmatch", "geolookup", "rbl") and "%{" not in rule.operator_argument:
                operators.add((rule.operator, rule.operator_argument))
            rule = rule.chained_rule
    return sorted(operators)


_CRS_VALUES = st.lists(
    st.sampled_from(
        [
            *(b"a", b"'", b'"', b" ", b"=", b"1", b" or ", b"select", b"<", b">", b"script", b"/", b"..", b"("),
            *(b")", b";", b"union", b"etc/passwd", b"%", b"&", b"#", b"-", b"\n", b"\\", b"$", b"{", b"*", b"from"),
            *(b"cmd.exe", b"/bin/sh", b"<?php", b"eval(", b"nikto", b"sqlmap", b"java.lang", b"%c0%af", b"\xc0\xaf"),
            *(b"document.cookie", b"onerror", b"application/json", b"charset=utf-8", b"127.0.0.1", b"\x00"),
        ]
    ),
    max_size=10,
).map(b"".join)


@pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")
@settings(max_examples=25, deadline=None)
@given(st.lists(_CRS_VALUES, min_size=1, max_size=4))
def test_crs_operators_agree_with_libmodsecurity(libmodsecurity: OperatorOracle, values: list[bytes]) -> None:
    for name, argument, operator in _compiled_crs_operators():
        from_file = name.lower() in ("pmfromfile", "pmf", "ipmatchfromfile")
        oracle_argument = str(CRS_RULES / argument) if from_file else argument
        for value in values:
            expected = libmodsecurity.run(name, oracle_argument, value)
            assert (operator(value) is None) == (expected is None), (name, argument[:60], value)


_COMPILED: list[tuple[str, str, Operator]] = []


def _compiled_crs_operators() -> list[tuple[str, str, Operator]]:
    if not _COMPILED:
        for name, argument in _crs_operators():
            _COMPILED.append((name, argument, compile_operator(name, argument, data_dir=CRS_RULES)))
    return _COMPILED
