"""SecLang transformations: each one against what libmodsecurity 3.0.9 gives for the same bytes.

The table's expected values were produced by libmodsecurity 3.0.9 itself; where the library is installed,
``test_agrees_with_libmodsecurity`` also compares random values against it, through its C API (a one-rule
configuration whose log message carries the transformed value, hex-encoded).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.seclang.errors import SecLangError, UnknownTransformation
from edgeplane.seclang.pipeline import Pipeline
from edgeplane.seclang.transformations import (
    TRANSFORMATION_NAMES,
    UNICODE_MAP_FILE,
    _base64_decode_scan,
    transformation,
    word_form,
)
from tests.support.modsecurity import ModSecurity

CASES = [
    ("urlDecode", b"a%41%4a+b", b"aAJ b"),
    ("urlDecode", b"%", b"%"),
    ("urlDecode", b"%4", b"%4"),
    ("urlDecode", b"%4g%41", b"%4gA"),
    ("urlDecode", b"%%41", b"%A"),
    ("urlDecode", b"%00x", b"\x00x"),
    ("urlDecode", b"%u0041", b"%u0041"),
    ("urlDecodeUni", b"a%41+%u0041%U0041", b"aA AA"),
    ("urlDecodeUni", b"%u00e9%u00E9", b"ee"),
    ("urlDecodeUni", b"%uff21%uFF01", b"A!"),
    ("urlDecodeUni", b"%u1234", b"4"),
    ("urlDecodeUni", b"%uff00", b"\x00"),
    ("urlDecodeUni", b"%u2000", b" "),
    ("urlDecodeUni", b"%u20ac", b"\xac"),
    ("urlDecodeUni", b"%u004", b"%u004"),
    ("urlDecodeUni", b"%u004g", b"%u004g"),
    ("urlDecodeUni", b"%uzzzz%41", b"%uzzzzA"),
    ("urlDecodeUni", b"%u12345", b"45"),
    ("urlDecodeUni", b"%", b"%"),
    ("urlDecodeUni", b"%4g", b"%4g"),
    ("htmlEntityDecode", b"&lt;&LT&gt;&quot;&amp;&nbsp;", b'<<>"&\xa0'),
    ("htmlEntityDecode", b"&#65;&#x41;&#X41&#65x", b"AAAAx"),
    ("htmlEntityDecode", b"&#x4142;", b"B"),
    ("htmlEntityDecode", b"&#99999999999999999999999;", b"\xff"),
    ("htmlEntityDecode", b"&foo;&&amp", b"&foo;&&"),
    ("htmlEntityDecode", b"&#;&#x;&#", b"&#;&#x;&#"),
    ("htmlEntityDecode", b"&quot&ampx", b'"&ampx'),
    ("htmlEntityDecode", b"&", b"&"),
    ("jsDecode", b"\\u0041\\uff21\\uFF01\\u1234", b"AA!4"),
    ("jsDecode", b"\\x41\\x4", b"Ax4"),
    ("jsDecode", b"\\101\\477\\0", b"A'7\x00"),
    ("jsDecode", b"\\n\\t\\r\\a\\b\\f\\v", b"\n\t\r\x07\x08\x0c\x0b"),
    ("jsDecode", b'\\z\\"\\\\', b'z"\\'),
    ("jsDecode", b"\\u00", b"u00"),
    ("jsDecode", b"\\U0041", b"U0041"),
    ("jsDecode", b"trailing\\", b"trailing\\"),
    ("cssDecode", b"\\41\\z", b"Az"),
    ("cssDecode", b"\\ff21 x", b"Ax"),
    ("cssDecode", b"\\0000ff21", b"\xff21"),
    ("cssDecode", b"\\00ff21", b"A"),
    ("cssDecode", b"\\1ff21", b"!"),
    ("cssDecode", b"\\4 1", b"\x041"),
    ("cssDecode", b"\\\nx", b"x"),
    ("cssDecode", b"ab\\", b"ab"),
    ("cssDecode", b"a\x00b", b"a"),
    ("cssDecode", b"\\0 b", b""),
    ("cssDecode", b"\\0b", b"\x0b"),
    ("escapeSeqDecode", b"\\n\\t\\\\\\?\\'\\\"", b"\n\t\\?'\""),
    ("escapeSeqDecode", b"\\x41\\X41\\x4", b"AAx4"),
    ("escapeSeqDecode", b"\\101\\777\\8", b"A\xff8"),
    ("escapeSeqDecode", b"\\z", b"z"),
    ("escapeSeqDecode", b"end\\", b"end\\"),
    ("cmdLine", b'C:\\Win /c  "DIR" , ;x ^a (b', b"c:win/c dir x a(b"),
    ("cmdLine", b" /x", b"/x"),
    ("cmdLine", b"a\t\n/b", b"a/b"),
    ("cmdLine", b"A\x0bB\xc3", b"a\x0bb\xc3"),
    ("cmdLine", b"w'h'o\\am^i", b"whoami"),
    ("compressWhitespace", b"a  \t\r\n\x0b\x0cb", b"a b"),
    ("compressWhitespace", b"a\xa0\xa0b", b"a\xa0\xa0b"),
    ("compressWhitespace", b"  ", b" "),
    ("removeWhitespace", b" a\tb\xa0c\x0b\x0c\x85", b"abc\x85"),
    ("removeWhitespace", b"a\xc2\xa0b\xc2c", b"abc"),
    ("removeNulls", b"a\x00b\x00", b"ab"),
    ("replaceNulls", b"a\x00b\x00", b"a b "),
    ("replaceComments", b"a/*x*/b", b"a b"),
    ("replaceComments", b"a/*x", b"a "),
    ("replaceComments", b"/*/b", b" "),
    ("replaceComments", b"a/**/b/*c*/d", b"a b d"),
    ("removeComments", b"a/*x*/b", b"ab"),
    ("removeComments", b"a/*x", b"a "),
    ("removeComments", b"a--b", b"a"),
    ("removeComments", b"a#b", b"a"),
    ("removeComments", b"a<!--b-->cd", b"acd"),
    ("removeComments", b"/*a*//*b*/c", b"/*b*/c"),
    ("removeComments", b"x/*a*/", b"x\x00"),
    ("removeCommentsChar", b"a/*b*/c<!--d-->e--f#g", b"abcdefg"),
    ("removeCommentsChar", b"-/*->", b"-->"),
    ("normalizePath", b"/a/b/../c/./d//e/", b"/a/c/d/e/"),
    ("normalizePath", b"../a/../../b", b"b"),
    ("normalizePath", b"/../x", b"/x"),
    ("normalizePath", b"a/./b/.", b"a/b"),
    ("normalizePath", b"/a/b/..", b"/a"),
    ("normalizePath", b"./a", b"a"),
    ("normalizePath", b"//", b"/"),
    ("normalizePath", b"/.", b""),
    ("normalizePath", b"a/b/../../../c", b"../c"),
    ("normalizePathWin", b"C:\\a\\..\\b\\\\c", b"C:/b/c"),
    ("normalizePathWin", b"\\a\\.\\b\\", b"/a/b/"),
    ("normalizePathWin", b"..\\x", b"../x"),
    ("utf8toUnicode", b"a\xc3\xa9b", b"a%u00e9b"),
    ("utf8toUnicode", b"\xe2\x82\xac\xf0\x9f\x98\x80", b"%u20ac%u1f600"),
    ("utf8toUnicode", b"\xc3(", b"("),
    ("utf8toUnicode", b"\xff\x80", b"\xff\x80"),
    ("utf8toUnicode", b"\xed\xa0\x80", b"%ud800\xed"),
    ("utf8toUnicode", b"\xc1\x81", b"%u0041\xc1"),
    ("utf8toUnicode", b"a\x00b", b"ab"),
    ("utf8toUnicode", b"\xc3", b""),
    ("utf8toUnicode", b"\xf5\x80\x80\x80", b"\xf5%u140000"),
    ("base64Decode", b"YWJj", b"abc"),
    ("base64Decode", b"YWJjZA", b"abc"),
    ("base64Decode", b"YWJjZA==", b"abcd"),
    ("base64Decode", b"YWJ=", b"ab"),
    ("base64Decode", b"YWJjZA=", b"abc"),
    ("base64Decode", b"YWJj\r\nZA==", b"abcd"),
    ("base64Decode", b"YWJj\nZGVm", b"abcdef"),
    ("base64Decode", b"YWJj  ", b"abc"),
    ("base64Decode", b"YW Jj", b""),
    ("base64Decode", b"  YWJj", b""),
    ("base64Decode", b"YWJj!", b""),
    ("base64Decode", b"Y=Jj", b""),
    ("base64Decode", b"YWJj\x00ZGVm", b"abc"),
    ("base64Decode", b"YWJ\rj", b""),
    ("base64DecodeExt", b"YWJj", b"abc"),
    ("base64DecodeExt", b"YWJjZA", b"abcd"),
    ("base64DecodeExt", b"YWJjZA==", b"abcd"),
    ("base64DecodeExt", b"YW Jj!@", b"abc"),
    ("base64DecodeExt", b"YW=Jj", b"abc"),
    ("base64DecodeExt", b"Y=", b""),
    ("base64DecodeExt", b"Y-_j", b"b"),
    ("base64DecodeExt", b"YWJj9", b""),
    ("base64DecodeExt", b"YWJj9x", b"abc\xf7"),
    ("base64DecodeExt", b"YWJj9!", b"abc"),
    ("base64DecodeExt", b"YWJj\x00ZGVm", b"abcdef"),
    ("sqlHexDecode", b"0x414243", b"ABC"),
    ("sqlHexDecode", b"x0x4142z", b"xABz"),
    ("sqlHexDecode", b"0X41g", b"Ag"),
    ("sqlHexDecode", b"00x41", b"0A"),
    ("sqlHexDecode", b"0x4", b"0x"),
    ("sqlHexDecode", b"0x", b"0"),
    ("sqlHexDecode", b"abc", b"ab"),
    ("sqlHexDecode", b"a", b""),
    ("sqlHexDecode", b"a0x41\x00b", b"aA"),
    ("hexDecode", b"414243", b"ABC"),
    ("hexDecode", b"414", b"A"),
    ("hexDecode", b"zz", b"S"),
    ("hexDecode", b"4G", b"P"),
    ("hexEncode", b"A\x00\xff", b"4100ff"),
    ("lowercase", b"AbC\xc4\xe4", b"abc\xc4\xe4"),
    ("uppercase", b"aBc\xe4", b"ABC\xe4"),
    ("trim", b" \t\r\n\x0b\x0ca b\x0c\x0b ", b"a b"),
    ("trim", b"\xa0 a \xa0", b"\xa0 a \xa0"),
    ("trim", b"\x00 a", b"\x00 a"),
    ("trimLeft", b"\x0b\x0c a \x0c\x0b", b"a \x0c\x0b"),
    ("trimRight", b"\x0b\x0c a \x0c\x0b", b"\x0b\x0c a"),
    ("length", b"", b"0"),
    ("length", b"abc", b"3"),
    ("length", b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", b"12"),
    ("md5", b"", bytes.fromhex("d41d8cd98f00b204e9800998ecf8427e")),
    ("md5", b"abc", bytes.fromhex("900150983cd24fb0d6963f7d28e17f72")),
    ("sha1", b"", bytes.fromhex("da39a3ee5e6b4b0d3255bfef95601890afd80709")),
    ("sha1", b"abc", bytes.fromhex("a9993e364706816aba3e25717850c26c9cd0d89d")),
]


@pytest.mark.parametrize(("name", "value", "expected"), CASES)
def test_transformation(name: str, value: bytes, expected: bytes) -> None:
    assert transformation(name)(value) == expected


# Every transformation the Core Rule Set 3.3.4 request rules use, by the name they use, and the rest the issue names.
CRS_NAMES = [
    "base64Decode",
    "cmdLine",
    "compressWhitespace",
    "cssDecode",
    "hexEncode",
    "htmlEntityDecode",
    "jsDecode",
    "length",
    "lowercase",
    "normalisePath",
    "normalizePath",
    "normalizePathWin",
    "removeNulls",
    "removeWhitespace",
    "replaceComments",
    "sha1",
    "urlDecode",
    "urlDecodeUni",
    "utf8toUnicode",
]
ISSUE_NAMES = [
    "base64DecodeExt",
    "escapeSeqDecode",
    "hexDecode",
    "md5",
    "removeComments",
    "removeCommentsChar",
    "replaceNulls",
    "sqlHexDecode",
    "trim",
    "trimLeft",
    "trimRight",
    "uppercase",
]


@pytest.mark.parametrize("name", CRS_NAMES + ISSUE_NAMES)
def test_names_are_implemented_and_listed(name: str) -> None:
    assert name.lower() in TRANSFORMATION_NAMES
    assert transformation(name) is transformation(name.upper()) is transformation(name.lower())


def test_names_are_lower_case() -> None:
    assert all(name == name.lower() for name in TRANSFORMATION_NAMES)


@pytest.mark.parametrize("name", ["none", "", "urlDecodeUnicode", "t:lowercase", "parityEven7bit"])
def test_unknown_names_raise(name: str) -> None:
    with pytest.raises(UnknownTransformation) as raised:
        transformation(name)
    assert isinstance(raised.value, SecLangError)


# --- properties -----------------------------------------------------------------------------------------------------

# Bytes the decoders react to, so that random values hit their escapes often.
INTERESTING = b"%uU+&#;xX\\/.*-<!>\"'^,()0123456789aAfFgGzZ=\x00 \t\r\n\x0b\x0c\xa0\x80\xc3\xe2\xf0\xff"
values = st.one_of(st.binary(max_size=64), st.lists(st.sampled_from(INTERESTING), max_size=40).map(bytes))
ALL_NAMES = sorted(TRANSFORMATION_NAMES)


@pytest.mark.parametrize("name", ALL_NAMES)
@given(value=values)
def test_never_raises_and_gives_bytes(name: str, value: bytes) -> None:
    assert type(transformation(name)(value)) is bytes


IDEMPOTENT = [
    "cmdLine",
    "compressWhitespace",
    "lowercase",
    "removeNulls",
    "removeWhitespace",
    "replaceNulls",
    "trim",
    "trimLeft",
    "trimRight",
    "uppercase",
]


@pytest.mark.parametrize("name", IDEMPOTENT)
@given(value=values)
def test_idempotent(name: str, value: bytes) -> None:
    once = transformation(name)(value)
    assert transformation(name)(once) == once


@given(value=values)
def test_lowercase_changes_ascii_letters_only(value: bytes) -> None:
    lowered = transformation("lowercase")(value)
    assert len(lowered) == len(value)
    for before, after in zip(value, lowered, strict=True):
        assert after == (before + 32 if 0x41 <= before <= 0x5A else before)


@given(value=values)
def test_hex_decode_inverts_hex_encode(value: bytes) -> None:
    assert transformation("hexDecode")(transformation("hexEncode")(value)) == value


@given(value=values)
def test_length_is_ascii_decimal(value: bytes) -> None:
    assert transformation("length")(value) == str(len(value)).encode()


@pytest.mark.parametrize("name", ["urlDecode", "urlDecodeUni", "htmlEntityDecode", "jsDecode", "cssDecode"])
@given(value=values)
def test_decoders_never_lengthen(name: str, value: bytes) -> None:
    assert len(transformation(name)(value)) <= len(value)


@pytest.mark.parametrize(
    ("name", "trigger"),
    [("urlDecode", b"%+"), ("urlDecodeUni", b"%+"), ("jsDecode", b"\\"), ("htmlEntityDecode", b"&")],
)
@given(value=values)
def test_values_without_escapes_pass_unchanged(name: str, trigger: bytes, value: bytes) -> None:
    plain = value.translate(None, trigger)
    assert transformation(name)(plain) == plain


# Words: ASCII letters and digits only, the values a pipeline answers without running its transformations.
words = st.one_of(
    st.binary(min_size=1, max_size=80).map(lambda raw: bytes(b"0123456789abcdefxXABCDEFz"[b % 25] for b in raw)),
    st.text(alphabet="0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1).map(str.encode),
)


@pytest.mark.parametrize("name", ALL_NAMES)
@given(word=words)
def test_word_form_is_what_the_transformation_does_to_a_word(name: str, word: bytes) -> None:
    form = word_form(name)
    if form is not None:
        expected = {"same": word, "lower": word.lower(), "upper": word.upper()}[form]
        assert transformation(name)(word) == expected


def _steps(names: tuple[str, ...], multi_match: bool, value: bytes) -> tuple[bytes, ...]:
    """What a pipeline gives, transformation by transformation (the definition ``Pipeline`` must keep)."""
    steps = [value]
    for name in names:
        value = transformation(name)(value)
        if value != steps[-1]:
            steps.append(value)
    return tuple(steps) if multi_match else (value,)


@given(
    names=st.lists(st.sampled_from(ALL_NAMES), max_size=6).map(tuple),
    multi_match=st.booleans(),
    value=st.one_of(words, values),
)
def test_a_pipeline_gives_what_its_transformations_give(
    names: tuple[str, ...], multi_match: bool, value: bytes
) -> None:
    pipeline = Pipeline(names, multi_match=multi_match)
    assert pipeline(value) == _steps(names, multi_match, value)
    assert pipeline(value) == _steps(names, multi_match, value)  # remembered


@given(text=st.text(alphabet="ABCXYZabcxyz0189+/", max_size=80).map(str.encode))
def test_base64_decode_of_alphabet_symbols_is_the_scan(text: bytes) -> None:
    assert transformation("base64Decode")(text) == _base64_decode_scan(text)


@given(code=st.integers(min_value=0, max_value=0xFFFF))
def test_url_decode_uni_maps_every_code_point_to_one_byte(code: int) -> None:
    assert len(transformation("urlDecodeUni")(b"%%u%04x" % code)) == 1


def test_url_decode_uni_uses_code_page_20127() -> None:
    entries = tomllib.loads(UNICODE_MAP_FILE.read_text())["entries"].split()
    decode = transformation("urlDecodeUni")
    for entry in entries:
        code, _, byte = entry.partition(":")
        assert decode(b"%u" + code.encode()) == bytes([int(byte, 16)])


# --- differential: libmodsecurity 3.0.9 -----------------------------------------------------------------------------


class TransformationOracle:
    """libmodsecurity as an oracle for transformations: ``transform(name, value)`` runs ``t:name`` on ``value`` (sent
    as a request header) in a one-rule configuration and reads the result back from the rule's log message, where
    ``t:hexEncode`` has made it printable. ``unicode_mapping`` is the code page file ``t:urlDecodeUni`` uses."""

    def __init__(self, modsecurity: ModSecurity, unicode_mapping: Path) -> None:
        self._modsecurity = modsecurity
        self._unicode_mapping = unicode_mapping

    def transform(self, name: str, value: bytes) -> bytes:
        rules = self._modsecurity.rules(
            f"SecUnicodeMapFile {self._unicode_mapping} 20127\n"
            "SecRuleEngine On\n"
            'SecRule REQUEST_HEADERS:x "@unconditionalMatch" '
            f"\"id:1,phase:1,pass,log,t:none,t:{name},t:hexEncode,msg:'<%{{MATCHED_VAR}}>'\"\n"
        )
        outcome = rules.process_request(b"GET", b"/", [(b"x", value)])
        message = outcome.message(1)
        if message is None:
            raise AssertionError(f"no log line for t:{name} on {value!r}: {outcome.log!r}")
        return bytes.fromhex(message[1:-1].decode("ascii"))


@pytest.fixture(scope="module")
def libmodsecurity(
    reference_modsecurity: ModSecurity, tmp_path_factory: pytest.TempPathFactory
) -> TransformationOracle:
    # The code page the engine uses, written in unicode.mapping's own format for the library to load.
    entries = tomllib.loads(UNICODE_MAP_FILE.read_text())["entries"].split()
    mapping = tmp_path_factory.mktemp("modsecurity") / "unicode.mapping"
    mapping.write_text("20127 (US-ASCII)\n" + " ".join(entries) + "\n\n")
    return TransformationOracle(reference_modsecurity, mapping)


# Per transformation, the bytes its decoder reacts to, so that random values are dense in escapes.
ALPHABETS = {
    "base64decode": b"YWJjZA=+/ \r\n\x00!-_",
    "base64decodeext": b"YWJjZA=+/ \r\n\x00!-_",
    "cmdline": b"aAzZ\\\"'^ ,;\t\r\n\x0b/(\x00\xc3",
    "cssdecode": b"\\0123456789aAfFgG \n\t\x0b\x00",
    "escapeseqdecode": b"\\xX0123456789aAfFgbnrtv?'\"\x00 ",
    "hexdecode": b"0123456789aAfFgGzZ\x00",
    "htmlentitydecode": b"&#;xX0123456789aAfFgltqumpnbsoLTQ \x00",
    "jsdecode": b"\\uxUX0123456789aAfFgbnrtv\x00 ",
    "normalisepath": b"/..a\x00",
    "normalisepathwin": b"/\\..a",
    "normalizepath": b"/..ab\x00",
    "normalizepathwin": b"/\\..ab",
    "removecomments": b"/*-#<!>a \x00",
    "removecommentschar": b"/*-#<!>a \x00",
    "replacecomments": b"/*a \x00",
    "sqlhexdecode": b"0xX0123456789aAfFgG\x00",
    "urldecode": b"%+0123456789aAfFgGuU\x00",
    "urldecodeuni": b"%+0123456789aAfFgGuU\x00e",
    "utf8tounicode": bytes(range(256)),
}
utf8_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=12).map(lambda text: text.encode("utf-8"))


def dense_values(name: str) -> st.SearchStrategy[bytes]:
    alphabet = ALPHABETS.get(name, INTERESTING)
    dense = st.lists(st.sampled_from(alphabet), max_size=40).map(bytes)
    extra: list[st.SearchStrategy[bytes]] = [utf8_text] if name == "utf8tounicode" else []
    return st.one_of(dense, st.binary(max_size=40), *extra)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_agrees_with_libmodsecurity(name: str, libmodsecurity: TransformationOracle) -> None:
    ours: Callable[[bytes], bytes] = transformation(name)

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(value=dense_values(name))
    def agree(value: bytes) -> None:
        assert ours(value) == libmodsecurity.transform(name, value)

    agree()
