"""PCRE patterns (as ModSecurity compiles them: bytes, DOTALL, MULTILINE) on RE2, and Python's re where RE2 cannot
follow: tables of PCRE's meaning, a generated differential against Python's re (which reads the same syntax for the
constructs generated), and every @rx of the installed Core Rule Set compiled."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.seclang.errors import OperatorArgumentError
from edgeplane.seclang.operators import compile_regex
from edgeplane.seclang.pcre import translate
from edgeplane.seclang.rule_files import SecRule, load_rule_files

CRS_RULES = Path("/usr/share/modsecurity-crs/rules")


# pattern, values that match, values that do not: PCRE's meaning without UTF mode
MEANING = [
    # DOTALL and MULTILINE are on, as ModSecurity sets them
    (rb"a.b", [b"a\nb", b"a\xffb"], [b"ab"]),
    (rb"^b", [b"a\nb", b"b"], [b"ab"]),
    (rb"a$", [b"a\nb", b"a", b"a\n"], [b"ab"]),
    (rb"^$", [b"", b"\n", b"a\n\n"], [b"a\n", b"a"]),  # no line starts after the newline that ends the text
    (rb"^x?$", [b"\n\n", b"a\nx"], [b"a\n"]),
    (rb"(?-m)a$", [b"a", b"a\n"], [b"a\nb"]),
    (rb"(?-s)a.b", [b"a-b"], [b"a\nb"]),
    # \s includes VT; \v is vertical space (with \x85), \h horizontal space (with \xa0)
    (rb"a\sb", [b"a\x0bb", b"a\tb", b"a b"], [b"a\x85b", b"a\xa0b"]),
    (rb"a\vb", [b"a\nb", b"a\x0bb", b"a\rb", b"a\x85b"], [b"avb", b"a b"]),
    (rb"a[\v]b", [b"a\x85b"], [b"avb"]),
    (rb"a\hb", [b"a\tb", b"a\xa0b"], [b"a\nb"]),
    (rb"a\Sb", [b"axb"], [b"a\x0bb"]),
    # caseless matching folds ASCII only
    (rb"(?i)abc", [b"ABC", b"aBc"], [b"ab"]),
    (rb"(?i)\xe9", [b"\xe9"], [b"\xc9"]),
    (rb"(?i:[\xe0-\xe9])", [b"\xe1"], [b"\xc1"]),
    (rb"(?i)[^a]", [b"b"], [b"A", b"a"]),
    (rb"a(?i)b|c", [b"aB", b"C"], [b"Ab"]),  # the setting lasts into later alternatives of its group
    (rb"(a(?i)b)c", [b"aBc"], [b"aBC"]),  # ... and ends with its group
    # \w, \d, \b know ASCII only
    (rb"\w", [b"_", b"9"], [b"\xe9", b"-"]),
    (rb"\bfoo\b", [b"a foo.", b"foo"], [b"afoo", b"\xe9foo_"]),
    # \Z: the end, or before a final newline; \z, \A
    (rb"a\Z", [b"a", b"a\n"], [b"a\n\n", b"a\nb"]),
    (rb"a\z", [b"a"], [b"a\n"]),
    (rb"\Aa", [b"ab"], [b"ba", b"b\na"]),
    # escapes
    (rb"\x41\x{42}\103\0", [b"ABC\0"], [b"ABC"]),
    (rb"\e\a\cA", [b"\x1b\x07\x01"], [b"eaA"]),
    (rb"[\x5c\]]", [b"\\", b"]"], [b"x"]),
    (rb"\Qa.b\E.", [b"a.bx"], [b"axbx"]),
    (rb"[\Q]\E]", [b"]"], [b"\\"]),
    # classes
    (rb"[[:alpha:]]+1", [b"ab1"], [b"_1", b"\xe91"]),
    (rb"[[:^digit:]]", [b"a"], [b"1"]),
    (rb"[]a]", [b"]"], [b"b"]),
    (rb"[^]a]", [b"b"], [b"]", b"a"]),
    (rb"[a-]", [b"-"], [b"b"]),
    (rb"[\"' ?[=<>]", [b"[", b"="], [b"]"]),  # "[=" that meets "]" first is no POSIX item
    (rb"[\b]", [b"\x08"], [b"b"]),
    # quantifiers
    (rb"a{2}", [b"aa"], [b"a"]),
    (rb"a{2,}b", [b"aaab"], [b"ab"]),
    (rb"a{,2}", [b"a{,2}"], [b"aa"]),  # not a quantifier in PCRE
    (rb"x{1001}", [b"x" * 1001], [b"x" * 1000]),
    (rb"a*+a", [], [b"aaaa"]),  # possessive: never gives back
    (rb"\s*+;", [b"  ;"], [b"  "]),
    (rb"(?>a+)b", [b"aab"], [b"aa"]),
    (rb"(?>a|ab)c", [b"ac"], [b"abc"]),
    # lookarounds, backreferences
    (rb"(?<!&amp|&lt);", [b"a;", b";", b"&gt;"], [b"&amp;", b"&lt;"]),
    (rb"(?<=ab|c)d", [b"abd", b"cd"], [b"bd"]),
    (rb"a(?=b)", [b"ab"], [b"ac"]),
    (rb"a(?!b)", [b"ac", b"a"], [b"ab"]),
    (rb"(\w+)=\1", [b"ab=ab"], [b"ab=cd"]),
    (rb"(?i)(a)\1", [b"aA"], [b"ab"]),
    (rb"(?<n>a)\k<n>", [b"aa"], [b"ab"]),
    (rb"(a)(?P<x>b)\g{2}", [b"abb"], [b"aba"]),
    (rb"(a)\g{-1}", [b"aa"], [b"ab"]),
    # comments, extended mode
    (rb"a(?#note)b", [b"ab"], [b"a(b"]),
    (rb"(?x) a b # comment", [b"ab"], [b"a b"]),
    # non-UTF-8 bytes in the pattern stand for themselves
    ("[\u00b4\u2019]".encode(), [b"\xc2", b"\xb4", b"\x99"], [b"a"]),  # the UTF-8 of an accent and a quote
]


@pytest.mark.parametrize(("pattern", "matching", "other"), MEANING)
def test_meaning(pattern: bytes, matching: list[bytes], other: list[bytes]) -> None:
    search = compile_regex(pattern)
    for value in matching:
        assert search(value) is not None, value
    for value in other:
        assert search(value) is None, value


CAPTURES = [
    (rb"a(b)?(c)", b"xac", (b"ac", b"", b"c")),
    (rb"(\d+)-(\d+)", b"tel 12-34", (b"12-34", b"12", b"34")),
    (rb"(?:x)(y)", b"xy", (b"xy", b"y")),
    (rb"(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", b"abcdefghij", (b"abcdefghij", *(bytes([c]) for c in b"abcdefghi"))),
    (rb"(\w+)=(?!\1)(\w+)", b"a=a b=c", (b"b=c", b"b", b"c")),  # confirmed by Python's re
    (rb"", b"anything", (b"anything",)),  # ModSecurity compiles an empty pattern as ".*"
]


@pytest.mark.parametrize(("pattern", "value", "captures"), CAPTURES)
def test_captures(pattern: bytes, value: bytes, captures: tuple[bytes, ...]) -> None:
    assert compile_regex(pattern)(value) == captures


APPROXIMATIONS = [
    (rb"abc", ()),
    (rb"\s*+;", ()),  # the possessive run cannot be followed by its own class: plain greedy is the same
    (rb"\s*+[^;]+=", ()),  # X*+Y is X*Y' with Y' unable to begin inside the run
    (rb"a*+a?", ("possessive quantifier",)),
    (rb"(?<!a)b", ("negative lookbehind",)),
    (rb"(?=a)a", ("lookahead",)),
    (rb"(a)\1", ("backreference",)),
    (rb"(?>ab|a)", ("atomic group",)),
]


@pytest.mark.parametrize(("pattern", "approximations"), APPROXIMATIONS)
def test_what_needs_python(pattern: bytes, approximations: tuple[str, ...]) -> None:
    translation = translate(pattern)
    assert translation.approximations == approximations
    assert translation.exact is not approximations


@pytest.mark.parametrize(
    "pattern",
    [
        rb"(a",
        rb"a)",
        rb"[a",
        rb"*a",
        rb"a**",
        rb"\p{L}",
        rb"\k<nope>",
        rb"(?|a)",
        rb"[[:nope:]]",
        rb"\x{100}",
        b"z{3,2}",
    ],
)
def test_invalid_patterns(pattern: bytes) -> None:
    with pytest.raises(OperatorArgumentError):
        compile_regex(pattern)


# Generated patterns in the syntax Python's re and PCRE read alike, checked against Python's re on the same text.

_atoms = st.sampled_from(
    [
        "a",
        "b",
        "A",
        "-",
        ";",
        r"\.",
        r"\d",
        r"\w",
        r"\W",
        r"\s",
        r"\S",
        "[ab]",
        "[^a]",
        "[a-c;]",
        r"[\w-]",
        ".",
        r"\x00",
        r"\xe9",
        r"\b",
        r"\B",
        "^",
        "$",
        r"\A",
    ]
)


def _pattern(leaf: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    quantifier = st.sampled_from(["", "", "*", "+", "?", "*?", "+?", "{1,2}", "{2}", "*+", "++", "?+"])
    sequence = st.lists(leaf, min_size=1, max_size=4).map("".join)
    return st.one_of(
        st.tuples(st.lists(sequence, min_size=1, max_size=3), quantifier).map(
            lambda parts: "(?:" + "|".join(parts[0]) + ")" + parts[1]
        ),
        st.tuples(st.lists(sequence, min_size=1, max_size=2), quantifier).map(
            lambda parts: "(" + "|".join(parts[0]) + ")" + parts[1]
        ),
        sequence.map(lambda text: "(?i:" + text + ")"),
        sequence.map(lambda text: "(?>" + text + ")"),
        sequence.map(lambda text: "(?=" + text + ")"),
        sequence.map(lambda text: "(?!" + text + ")"),
        st.tuples(leaf, quantifier).map("".join),
    )


_patterns = st.recursive(
    st.tuples(_atoms, st.sampled_from(["", "*", "+", "?", "*?", "*+"])).map(
        lambda parts: parts[0] + (parts[1] if parts[0] not in (r"\b", r"\B", "^", "$", r"\A") else "")
    ),
    _pattern,
    max_leaves=8,
)
_values = st.lists(st.sampled_from([b"a", b"b", b"A", b"-", b";", b".", b"\n", b" ", b"\x0b", b"1", b"\xe9", b"\xc9"]))


def _python_search(pattern: str) -> re.Pattern[bytes] | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return re.compile(pattern.encode("latin-1"), re.DOTALL | re.MULTILINE)
        except re.error:
            return None


def _pcre_line_start(pattern: str) -> str:
    """A generated pattern with its ``^`` atoms written as PCRE means them for Python, whose multiline ``^`` also
    matches after a newline that ends the text."""
    return re.sub(r"(?<!\[)\^", lambda _: r"(?:\A|(?<=\n)(?=[\x00-\xff]))", pattern)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(_patterns, min_size=1, max_size=3).map("".join), st.lists(_values.map(b"".join), max_size=6))
def test_generated_patterns_match_as_python_re(pattern: str, values: list[bytes]) -> None:
    reference = _python_search(_pcre_line_start(pattern))
    if reference is None:
        return
    search = compile_regex(pattern.encode("latin-1"))
    for value in values:
        if not value and "\\B" in pattern:
            continue  # Python's \B never matches in an empty text; PCRE's (and RE2's) does
        found = reference.search(value)
        captures = search(value)
        assert (captures is None) == (found is None), (pattern, value)
        # The whole match agrees; groups may not, where a repeated group can match empty: PCRE and Python keep
        # the empty last iteration, RE2 the one before (the CRS patterns are compared with their groups below).
        assert captures is None or found is None or captures[0] == found.group(0), (pattern, value)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_patterns, min_size=1, max_size=2).map("".join),
    st.lists(st.sampled_from(["a", "b", "(", "|", ")", "\\1"]), max_size=3).map("".join),
    st.lists(_values.map(b"".join), max_size=6),
)
def test_generated_backreferences_match_as_python_re(head: str, tail: str, values: list[bytes]) -> None:
    pattern = "(" + head + ")" + tail
    reference = _python_search(_pcre_line_start(pattern))
    if reference is None:
        return
    search = compile_regex(pattern.encode("latin-1"))
    for value in values:
        if not value and "\\B" in pattern:
            continue  # Python's \B never matches in an empty text; PCRE's (and RE2's) does
        found = reference.search(value)
        captures = search(value)
        assert (captures is None) == (found is None), (pattern, value)
        # The whole match agrees; groups may not, where a repeated group can match empty: PCRE and Python keep
        # the empty last iteration, RE2 the one before (the CRS patterns are compared with their groups below).
        assert captures is None or found is None or captures[0] == found.group(0), (pattern, value)


# The installed Core Rule Set


def _crs_patterns() -> list[tuple[str, bytes]]:
    if not CRS_RULES.is_dir():
        return []
    patterns: list[tuple[str, bytes]] = []
    for directive in load_rule_files(sorted(CRS_RULES.glob("REQUEST-9*.conf"))):
        rule: SecRule | None = directive if isinstance(directive, SecRule) else None
        while rule is not None:
            if rule.operator.lower() == "rx":
                patterns.append((rule.source, rule.operator_argument.encode("utf-8", "surrogateescape")))
            rule = rule.chained_rule
    return patterns


@pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")
def test_every_crs_pattern_compiles(capsys: pytest.CaptureFixture[str]) -> None:
    patterns = _crs_patterns()
    assert len(patterns) > 200
    needing_python, after_final_newline = [], []
    for source, pattern in patterns:
        translation = translate(pattern)
        compile_regex(pattern)
        if translation.exact_unless_final_newline:
            after_final_newline.append(source)
        elif not translation.exact:
            needing_python.append(f"{source}: {', '.join(translation.approximations)}")
    with capsys.disabled():
        print(f"\n{len(patterns)} CRS patterns; confirmed by Python's re after an RE2 prefilter:")
        for line in needing_python:
            print("  " + line)
        print("confirmed by Python's re on texts ending in a newline (a ^ that may end the match):")
        print("  " + ", ".join(after_final_newline))
    # CRS 3.3.4: the HTML-entity lookbehind (920220's family), 942130's backreferences and two possessive runs
    assert len(needing_python) <= 4


_crs_alphabet = st.sampled_from(
    [
        *(b"a", b"'", b'"', b" ", b"=", b"1", b"or", b"select", b"<", b">", b"script", b"/", b"..", b"(", b")"),
        *(b";", b"union", b"etc/passwd", b"%", b"&", b"#", b"-", b"\n", b"\\", b"$", b"{", b"}", b"*", b"from"),
    ]
)


@pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")
@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_crs_alphabet, max_size=12).map(b"".join), min_size=1, max_size=4))
def test_crs_patterns_match_as_python_re(values: list[bytes]) -> None:
    for source, pattern in _CRS_READABLE:
        reference = _python_search(pattern.decode("latin-1"))
        assert reference is not None
        search = _CRS_COMPILED[pattern]
        for value in values:
            found = reference.search(value)
            expected = None if found is None else (found.group(0), *(g or b"" for g in found.groups()[:9]))
            assert search(value) == expected, (source, value)


def _python_readable(pattern: bytes) -> bool:
    # Python's re reads \v, \z, lookbehinds of several lengths and a ^ after a final newline otherwise than PCRE
    # (or not at all).
    return (
        b"\\v" not in pattern
        and b"\\z" not in pattern
        and b"(?<" not in pattern
        and not translate(pattern).exact_unless_final_newline
        and _python_search(pattern.decode("latin-1")) is not None
    )


_CRS_READABLE = [(source, pattern) for source, pattern in _crs_patterns() if _python_readable(pattern)]
_CRS_COMPILED = {pattern: compile_regex(pattern) for _, pattern in _CRS_READABLE}
