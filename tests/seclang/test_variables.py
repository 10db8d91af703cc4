"""RequestVariables: ModSecurity's collections of a request, as libmodsecurity 3.0.9 gives them.

The expected values in the tables were read from libmodsecurity 3.0.9 (Debian's libmodsecurity3) on the same
requests; where this engine differs on purpose the test says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edgeplane.seclang.request import HttpRequest
from edgeplane.seclang.variables import RequestVariables
from tests.support.modsecurity import RECOMMENDED_BODY_PROCESSORS, ModSecurity

Headers = tuple[tuple[bytes, bytes], ...]


def request(
    target: bytes = b"/",
    *,
    method: bytes = b"GET",
    headers: Headers = (),
    body: bytes = b"",
    content_type: bytes | None = None,
) -> HttpRequest:
    if content_type is not None:
        headers = (*headers, (b"Content-Type", content_type))
    return HttpRequest(method, target, b"HTTP/1.1", headers, body)


def scalar(variables: RequestVariables, name: str) -> bytes:
    (pair,) = variables.collection(name)
    assert pair[0] == b""
    return pair[1]


# --- the request line -----------------------------------------------------------------------------------------------

URI_CASES = [
    # target, REQUEST_URI, REQUEST_FILENAME, REQUEST_BASENAME, QUERY_STRING
    (b"/a%20b/c.php?x=1&y=%41+b", b"/a b/c.php?x=1&y=A+b", b"/a b/c.php", b"c.php", b"x=1&y=%41+b"),
    (b"/", b"/", b"/", b"", b""),
    (b"", b"", b"", b"", b""),
    (b"*", b"*", b"*", b"", b""),
    (b"/a/b/?q", b"/a/b/?q", b"/a/b/", b"", b"q"),
    (b"/a#f?x=1", b"/a", b"/a", b"a", b""),
    (b"/p%3fq?x", b"/p?q?x", b"/p", b"p", b"x"),
    (b"/a\\b%5cc", b"/a\\b\\c", b"/a\\b\\c", b"c", b""),
    (b"/%41%4?a=%4", b"/A%4?a=%4", b"/A%4", b"A%4", b"a=%4"),
    (b"/%%41+%u0041%2", b"/%A+%u0041%2", b"/%A+%u0041%2", b"%A+%u0041%2", b""),
    (b"/a%00b?c%00d=e", b"/a\x00b?c\x00d=e", b"/a\x00b", b"a\x00b", b"c%00d=e"),
    (b"x/y?z", b"x/y?z", b"x/y", b"y", b"z"),
    (
        b"http://Host.com:80/p%61th/x.php?a=%2fb#frag",
        b"/path/x.php?a=/b",
        b"http://Host.com:80/path/x.php",
        b"x.php",
        b"a=%2fb",
    ),
    (b"http://host.com", b"http://host.com", b"http://host.com", b"host.com", b""),
    (b"http:/x/y", b"http:/x/y", b"http:/x/y", b"y", b""),
]


@pytest.mark.parametrize(("target", "uri", "filename", "basename", "query"), URI_CASES)
def test_uri_variables(target: bytes, uri: bytes, filename: bytes, basename: bytes, query: bytes) -> None:
    variables = RequestVariables(request(target))
    assert scalar(variables, "REQUEST_URI") == uri
    assert scalar(variables, "REQUEST_FILENAME") == filename
    assert scalar(variables, "REQUEST_BASENAME") == basename
    assert scalar(variables, "QUERY_STRING") == query
    assert scalar(variables, "REQUEST_URI_RAW") == target


def test_request_line_method_protocol_keep_the_target_as_sent() -> None:
    variables = RequestVariables(request(b"/a%20b?x#f", method=b"PROPFIND"))
    assert scalar(variables, "REQUEST_LINE") == b"PROPFIND /a%20b?x#f HTTP/1.1"
    assert scalar(variables, "REQUEST_METHOD") == b"PROPFIND"
    assert scalar(variables, "REQUEST_PROTOCOL") == b"HTTP/1.1"


# --- arguments ------------------------------------------------------------------------------------------------------

QUERY_CASES = [
    (
        b"x=1&y=%41+b&z&&=q&x=%zz%2",
        [(b"x", b"1"), (b"y", b"A b"), (b"z", b""), (b"", b""), (b"", b"q"), (b"x", b"%zz%2")],
    ),
    (b"a=1&", [(b"a", b"1")]),
    (b"a=1&&", [(b"a", b"1"), (b"", b"")]),
    (b"&a", [(b"", b""), (b"a", b"")]),
    (b"a=b=c", [(b"a", b"b=c")]),
    (b"%e2%82%ac=%ZZ%%", [(b"\xe2\x82\xac", b"%ZZ%%")]),
    (b"c%00d=e%00f", [(b"c\x00d", b"e\x00f")]),
    (b"k+1=v+2", [(b"k 1", b"v 2")]),
]


@pytest.mark.parametrize(("query", "expected"), QUERY_CASES)
def test_query_arguments(query: bytes, expected: list[tuple[bytes, bytes]]) -> None:
    variables = RequestVariables(request(b"/p?" + query))
    assert list(variables.collection("ARGS_GET")) == expected
    assert list(variables.collection("ARGS")) == expected
    assert list(variables.collection("ARGS_GET_NAMES")) == [(name, name) for name, _ in expected]
    assert list(variables.collection("ARGS_NAMES")) == [(name, name) for name, _ in expected]
    assert variables.collection("ARGS_POST") == ()


@pytest.mark.parametrize(
    ("query", "error"), [(b"a=1", b"0"), (b"a=%4", b"1"), (b"a%zz=1", b"1"), (b"a=%41", b"0"), (b"", b"0")]
)
def test_urlencoded_error_flags_invalid_escapes(query: bytes, error: bytes) -> None:
    assert scalar(RequestVariables(request(b"/?" + query)), "URLENCODED_ERROR") == error


def test_urlencoded_body_adds_post_arguments_after_query_ones() -> None:
    variables = RequestVariables(
        request(
            b"/?q=1",
            method=b"POST",
            body=b"a=1&b=%zz&&c&a=2&",
            content_type=b"application/x-www-form-urlencoded; charset=utf-8",
        )
    )
    post = [(b"a", b"1"), (b"b", b"%zz"), (b"", b""), (b"c", b""), (b"a", b"2")]
    assert list(variables.collection("ARGS_POST")) == post
    assert list(variables.collection("ARGS")) == [(b"q", b"1"), *post]
    assert list(variables.collection("ARGS_POST_NAMES")) == [(name, name) for name, _ in post]
    assert scalar(variables, "REQBODY_PROCESSOR") == b"URLENCODED"
    assert scalar(variables, "URLENCODED_ERROR") == b"1"
    assert scalar(variables, "ARGS_COMBINED_SIZE") == b"11"  # q1 a1 b%zz c a2
    assert scalar(variables, "REQBODY_ERROR") == b""  # the urlencoded processor leaves it unset


def test_json_body_adds_to_args_but_not_args_post() -> None:
    variables = RequestVariables(
        request(b"/?q=1", method=b"POST", body=b'{"a": [1, {"b": "x"}]}', content_type=b"application/json")
    )
    assert list(variables.collection("ARGS")) == [(b"q", b"1"), (b"json.a.array_0", b"1"), (b"json.a.array_1.b", b"x")]
    assert variables.collection("ARGS_POST") == ()
    assert scalar(variables, "REQBODY_PROCESSOR") == b"JSON"
    assert scalar(variables, "REQBODY_ERROR") == b"0"
    assert scalar(variables, "ARGS_COMBINED_SIZE") == b"%d" % (2 + 15 + 17)


def test_multipart_fields_are_post_arguments_and_not_counted_in_combined_size() -> None:
    body = (
        b'--B\r\nContent-Disposition: form-data; name="a"\r\n\r\nv1\r\n'
        b'--B\r\nContent-Disposition: form-data; name="f"; filename="x.php"\r\nContent-Type: text/plain\r\n\r\n'
        b"<?php\r\n--B--\r\n"
    )
    variables = RequestVariables(
        request(b"/?q=1", method=b"POST", body=body, content_type=b"multipart/form-data; boundary=B")
    )
    assert list(variables.collection("ARGS")) == [(b"q", b"1"), (b"a", b"v1")]
    assert list(variables.collection("ARGS_POST")) == [(b"a", b"v1")]
    assert list(variables.collection("FILES")) == [(b"f", b"x.php")]
    assert list(variables.collection("FILES_NAMES")) == [(b"f", b"f")]
    assert list(variables.collection("FILES_SIZES")) == [(b"f", b"5")]
    assert scalar(variables, "FILES_COMBINED_SIZE") == b"5"
    assert scalar(variables, "ARGS_COMBINED_SIZE") == b"2"
    assert list(variables.collection("MULTIPART_PART_HEADERS")) == [
        (b"a", b'Content-Disposition: form-data; name="a"\r\n'),
        (b"f", b'Content-Disposition: form-data; name="f"; filename="x.php"\r\n'),
        (b"f", b"Content-Type: text/plain\r\n"),
    ]
    assert scalar(variables, "MULTIPART_STRICT_ERROR") == b"0"
    assert scalar(variables, "REQBODY_PROCESSOR") == b"MULTIPART"


# --- headers and cookies --------------------------------------------------------------------------------------------


def test_headers_keep_order_and_case() -> None:
    headers = ((b"Host", b"h"), (b"x-Foo", b"1"), (b"X-Foo", b"2"))
    variables = RequestVariables(request(headers=headers))
    assert tuple(variables.collection("REQUEST_HEADERS")) == headers
    assert list(variables.collection("REQUEST_HEADERS_NAMES")) == [
        (b"Host", b"Host"),
        (b"x-Foo", b"x-Foo"),
        (b"X-Foo", b"X-Foo"),
    ]


COOKIE_CASES = [
    (
        [b' a=1; b = 2 ;c=x=y;;d; =e;f="q;r" '],
        [(b"a", b"1"), (b"b ", b" 2 "), (b"c", b"x=y"), (b"d", b""), (b"f", b'"q'), (b'r"', b"")],
    ),
    ([b"g=%41+b"], [(b"g", b"%41+b")]),  # cookie values are not decoded
    ([b";", b""], []),
    ([b"a=1", b"b=2"], [(b"a", b"1"), (b"b", b"2")]),
    ([b"\t h\t=\t1\t"], [(b"h\t", b"\t1")]),
    ([b"=only-value; x"], [(b"x", b"")]),
]


@pytest.mark.parametrize(("values", "expected"), COOKIE_CASES)
def test_cookies(values: list[bytes], expected: list[tuple[bytes, bytes]]) -> None:
    headers = tuple((b"Cookie" if index % 2 == 0 else b"cookie", value) for index, value in enumerate(values))
    variables = RequestVariables(request(headers=headers))
    assert list(variables.collection("REQUEST_COOKIES")) == expected
    assert list(variables.collection("REQUEST_COOKIES_NAMES")) == [(name, name) for name, _ in expected]


# --- body processor choice ------------------------------------------------------------------------------------------

PROCESSOR_CASES = [
    ([b"application/x-www-form-urlencoded"], b"URLENCODED"),
    ([b"APPLICATION/X-WWW-FORM-URLENCODED"], b"URLENCODED"),
    ([b"multipart/form-data; boundary=x"], b"MULTIPART"),
    ([b"multipart/related; boundary=x"], b""),
    ([b"application/json"], b"JSON"),
    ([b"Application/JSON; charset=utf-8"], b"JSON"),
    ([b"application/vnd.api+json"], b""),
    ([b"application/xml"], b"XML"),
    ([b"text/xml; charset=utf-8"], b"XML"),
    ([b"application/soap+xml"], b"XML"),
    ([b"application/xhtml+xml"], b""),
    ([b"text/plain"], b""),
    ([], b""),
    ([b"application/json", b"application/xml"], b"JSON"),  # rule 200001 runs after 200000
    ([b"multipart/form-data; boundary=x", b"text/plain"], b"MULTIPART"),
]


@pytest.mark.parametrize(("content_types", "processor"), PROCESSOR_CASES)
def test_body_processor_follows_the_recommended_configuration(content_types: list[bytes], processor: bytes) -> None:
    headers = tuple((b"Content-Type", value) for value in content_types)
    variables = RequestVariables(request(method=b"POST", headers=headers, body=b"x"))
    assert scalar(variables, "REQBODY_PROCESSOR") == processor


def test_set_body_processor_reparses_the_body() -> None:
    variables = RequestVariables(request(method=b"POST", body=b"a=1&b=2", content_type=b"text/plain"))
    assert variables.collection("ARGS") == ()
    assert scalar(variables, "REQBODY_PROCESSOR") == b""
    variables.set_body_processor("URLENCODED")
    assert list(variables.collection("ARGS")) == [(b"a", b"1"), (b"b", b"2")]
    assert scalar(variables, "REQBODY_PROCESSOR") == b"URLENCODED"
    variables.set_body_processor("json")
    assert variables.collection("ARGS") == ()
    assert scalar(variables, "REQBODY_ERROR") == b"1"
    assert scalar(variables, "REQBODY_ERROR_MSG").startswith(b"JSON parsing error: ")


def test_unknown_processor_name_changes_nothing() -> None:
    variables = RequestVariables(
        request(method=b"POST", body=b"a=1", content_type=b"application/x-www-form-urlencoded")
    )
    variables.set_body_processor("YAML")
    assert list(variables.collection("ARGS")) == [(b"a", b"1")]


# --- the body itself ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        b"application/x-www-form-urlencoded",
        b"application/json",
        b"multipart/form-data; boundary=B",
        b"text/plain",
        None,
    ],
)
def test_request_body_is_the_raw_body_whatever_the_processor(content_type: bytes | None) -> None:
    variables = RequestVariables(request(method=b"POST", body=b"raw body", content_type=content_type))
    assert scalar(variables, "REQUEST_BODY") == b"raw body"
    assert scalar(variables, "REQUEST_BODY_LENGTH") == b"8"


def test_body_beyond_the_limit_is_cut_and_flagged() -> None:
    body = b"a=1&b=" + b"x" * 100
    variables = RequestVariables(
        request(method=b"POST", body=body, content_type=b"application/x-www-form-urlencoded"), body_limit=10
    )
    assert scalar(variables, "REQUEST_BODY") == body[:10]
    assert scalar(variables, "REQUEST_BODY_LENGTH") == b"10"
    assert scalar(variables, "INBOUND_DATA_ERROR") == b"1"
    assert list(variables.collection("ARGS")) == [(b"a", b"1"), (b"b", b"xxxx")]
    whole = RequestVariables(request(method=b"POST", body=body), body_limit=0)
    assert scalar(whole, "REQUEST_BODY") == body
    assert scalar(whole, "INBOUND_DATA_ERROR") == b"0"


def test_body_errors_are_variables_not_exceptions() -> None:
    variables = RequestVariables(request(method=b"POST", body=b'{"a":1, bad', content_type=b"application/json"))
    assert list(variables.collection("ARGS")) == [(b"json.a", b"1")]
    assert scalar(variables, "REQBODY_ERROR") == b"1"
    assert scalar(variables, "REQBODY_PROCESSOR_ERROR") == b"1"
    assert scalar(variables, "REQBODY_ERROR_MSG").startswith(b"JSON parsing error: ")


# --- XML ------------------------------------------------------------------------------------------------------------


def test_xml_paths_as_crs_uses_them() -> None:
    body = (
        b'<?xml version="1.0"?><xml><l1 a="1"><element attribute_name="v&amp;2">java.lang.Runtime</element></l1></xml>'
    )
    variables = RequestVariables(request(method=b"POST", body=body, content_type=b"application/xml"))
    assert list(variables.xml(b"/*")) == [(b"/*", b"java.lang.Runtime")]
    assert list(variables.xml(b"//@*")) == [(b"//@*", b"1"), (b"//@*", b"v&2")]
    assert variables.collection("XML") == ((b"", b"[XML document tree]"),)


def test_xml_is_empty_without_the_xml_processor() -> None:
    variables = RequestVariables(request(method=b"POST", body=b"<a>1</a>", content_type=b"text/plain"))
    assert variables.xml(b"/*") == ()
    assert variables.collection("XML") == ()
    variables.set_body_processor("XML")
    assert list(variables.xml(b"/*")) == [(b"/*", b"1")]


# --- scalars that are always there ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("QUERY_STRING", b""),
        ("REQUEST_BASENAME", b""),
        ("REQUEST_BODY", b""),
        ("REQBODY_PROCESSOR", b""),
        ("REQBODY_ERROR", b"0"),
        ("REQBODY_ERROR_MSG", b""),
        ("URLENCODED_ERROR", b"0"),
        ("INBOUND_DATA_ERROR", b"0"),
        ("MULTIPART_STRICT_ERROR", b""),
        ("MULTIPART_UNMATCHED_BOUNDARY", b""),
        ("REMOTE_ADDR", b"127.0.0.1"),
        ("FILES_COMBINED_SIZE", b"0"),
        ("ARGS_COMBINED_SIZE", b"0"),
    ],
)
def test_scalars_are_present_on_a_bare_request(name: str, value: bytes) -> None:
    assert scalar(RequestVariables(request()), name) == value


def test_unknown_and_engine_owned_names_are_empty() -> None:
    variables = RequestVariables(request(b"/?a=1"))
    for name in ("TX", "IP", "GLOBAL", "MATCHED_VAR", "RULE", "GEO", "NO_SUCH_VARIABLE"):
        assert variables.collection(name) == ()


def test_unique_id_is_stable_per_request_and_differs_between_requests() -> None:
    first, second = RequestVariables(request()), RequestVariables(request())
    assert scalar(first, "UNIQUE_ID") == scalar(first, "UNIQUE_ID")
    assert scalar(first, "UNIQUE_ID") != scalar(second, "UNIQUE_ID")
    assert float(scalar(first, "DURATION")) >= 0


def test_server_name_and_auth_type_come_from_headers() -> None:
    variables = RequestVariables(request(headers=((b"Host", b"example.com:8080"), (b"Authorization", b"Basic abc"))))
    assert scalar(variables, "SERVER_NAME") == b"example.com"
    assert scalar(variables, "AUTH_TYPE") == b"Basic"


def test_collections_are_built_once() -> None:
    variables = RequestVariables(request(b"/?a=1", headers=((b"Cookie", b"c=1"),)))
    assert variables.collection("ARGS") is variables.collection("ARGS")
    assert variables.collection("REQUEST_COOKIES") is variables.collection("REQUEST_COOKIES")


# --- never raises ---------------------------------------------------------------------------------------------------

ALL_VARIABLES = [
    "ARGS",
    "ARGS_GET",
    "ARGS_POST",
    "ARGS_NAMES",
    "ARGS_GET_NAMES",
    "ARGS_POST_NAMES",
    "ARGS_COMBINED_SIZE",
    "REQUEST_HEADERS",
    "REQUEST_HEADERS_NAMES",
    "REQUEST_COOKIES",
    "REQUEST_COOKIES_NAMES",
    "FILES",
    "FILES_NAMES",
    "FILES_SIZES",
    "FILES_COMBINED_SIZE",
    "MULTIPART_PART_HEADERS",
    "MULTIPART_NAME",
    "MULTIPART_FILENAME",
    "MULTIPART_STRICT_ERROR",
    "MULTIPART_UNMATCHED_BOUNDARY",
    "XML",
    "REQUEST_METHOD",
    "REQUEST_PROTOCOL",
    "REQUEST_LINE",
    "REQUEST_URI",
    "REQUEST_URI_RAW",
    "REQUEST_FILENAME",
    "REQUEST_BASENAME",
    "QUERY_STRING",
    "REQUEST_BODY",
    "REQUEST_BODY_LENGTH",
    "REQBODY_PROCESSOR",
    "REQBODY_ERROR",
    "REQBODY_ERROR_MSG",
    "URLENCODED_ERROR",
    "INBOUND_DATA_ERROR",
    "SERVER_NAME",
    "AUTH_TYPE",
    "UNIQUE_ID",
    "DURATION",
]

SEEDS = [b"", b"a=1&b", b"%", b"%zz+", b"#", b"?", b"/", b"\\", b";", b"=", b"\x00", b"\xff", b"--B", b"\r\n", b"\n"]
SEEDS += [b'{"a":', b"[1,", b'"', b"<a>", b"</a>", b'x="1"', b"<!DOCTYPE a>", b"&lt;", b"&x;", b"]]>", b"<![CDATA["]
SEEDS += [b"Content-Disposition: form-data; ", b'name="n"', b'filename="f"', b"Content-Type: ", b"http://h"]
FRAGMENTS = st.one_of(st.sampled_from(SEEDS), st.binary(max_size=8))
BYTES = st.lists(FRAGMENTS, max_size=12).map(b"".join)
CONTENT_TYPES = st.sampled_from(
    [
        b"application/x-www-form-urlencoded",
        b"application/json",
        b"application/xml",
        b"text/xml",
        b"multipart/form-data; boundary=B",
        b'multipart/form-data; boundary="B"',
        b"multipart/form-data",
        b"text/plain",
    ]
).map(lambda value: (b"Content-Type", value))
HEADERS = st.lists(st.one_of(CONTENT_TYPES, st.tuples(st.sampled_from([b"Cookie", b"Host", b"X"]), BYTES)), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    method=BYTES,
    target=BYTES,
    headers=HEADERS,
    body=BYTES,
    processor=st.sampled_from(["", "URLENCODED", "JSON", "XML", "MULTIPART"]),
)
def test_never_raises_on_any_request(
    method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes, processor: str
) -> None:
    variables = RequestVariables(HttpRequest(method, target, b"HTTP/1.1", tuple(headers), body), body_limit=64)
    if processor:
        variables.set_body_processor(processor)
    for name in ALL_VARIABLES:
        for key, value in variables.collection(name):
            assert isinstance(key, bytes)
            assert isinstance(value, bytes)
    for xpath in (b"/*", b"//@*", b"//*", b"/a/b", b"//a/@x", b"not a path"):
        for key, value in variables.xml(xpath):
            assert (key, type(value)) == (xpath, bytes)


# --- differential: libmodsecurity 3.0.9 -----------------------------------------------------------------------------


class ModSecurityVariables:
    """libmodsecurity through its C API, as an oracle for variables: one ``@unconditionalMatch`` rule per variable
    with ``t:hexEncode``, and the debug log (level 9), which names each value a rule evaluated. The log shortens long
    values (``(N characters omitted)``); such a value is compared by its prefix."""

    RECOMMENDED = (
        "SecRuleEngine On\n"
        "SecRequestBodyAccess On\n"
        "SecRequestBodyLimit 13107200\n"
        "SecRequestBodyLimitAction ProcessPartial\n" + RECOMMENDED_BODY_PROCESSORS
    )

    def __init__(self, modsecurity: ModSecurity, log: Path, names: Sequence[str]) -> None:
        self._log = log
        self._names = names
        rules_text = self.RECOMMENDED + f"SecDebugLog {log}\nSecDebugLogLevel 9\n"
        for index, name in enumerate(names):
            rule_id = 9000 + index
            rules_text += f'SecRule {name} "@unconditionalMatch" "id:{rule_id},phase:2,pass,nolog,t:none,t:hexEncode"\n'
        self._rules = modsecurity.rules(rules_text)

    def values(self, request: HttpRequest) -> dict[str, list[tuple[str, bytes | None, bytes]]]:
        """Per variable: (name as logged, value or None when shortened, value prefix)."""
        self._log.write_bytes(b"")
        http_version = request.protocol.removeprefix(b"HTTP/")
        self._rules.process_request(
            request.method, request.target, request.headers, request.body, http_version=http_version
        )
        found: dict[str, list[tuple[str, bytes | None, bytes]]] = {name: [] for name in self._names}
        rule = -1
        for line in self._log.read_bytes().split(b"\n"):
            executing = re.search(rb"\(Rule: (\d+)\) Executing operator", line)
            if executing:
                rule = int(executing.group(1)) - 9000
            target = re.search(rb'Target value: "([0-9a-f]*)( \(\d+ characters omitted\))?" \(Variable: (.*)\)$', line)
            if target and 0 <= rule < len(self._names):
                hex_digits = target.group(1)[: len(target.group(1)) // 2 * 2]
                prefix = bytes.fromhex(hex_digits.decode())
                logged = target.group(3).decode("utf-8", "replace")
                found[self._names[rule]].append((logged, None if target.group(2) else prefix, prefix))
        return found


DIFFERENTIAL_VARIABLES = [
    "ARGS",
    "ARGS_NAMES",
    "ARGS_GET",
    "ARGS_POST",
    "REQUEST_HEADERS",
    "REQUEST_COOKIES",
    "REQUEST_COOKIES_NAMES",
    "REQUEST_URI",
    "REQUEST_URI_RAW",
    "REQUEST_FILENAME",
    "REQUEST_BASENAME",
    "QUERY_STRING",
    "REQUEST_LINE",
    "REQUEST_BODY",
    "REQBODY_PROCESSOR",
    "REQBODY_ERROR",
    "URLENCODED_ERROR",
    "ARGS_COMBINED_SIZE",
    "REQUEST_BODY_LENGTH",
    "FILES",
    "FILES_NAMES",
    "FILES_SIZES",
    "FILES_COMBINED_SIZE",
    "MULTIPART_PART_HEADERS",
    "MULTIPART_STRICT_ERROR",
    "MULTIPART_UNMATCHED_BOUNDARY",
    "MULTIPART_DATA_BEFORE",
    "MULTIPART_DATA_AFTER",
    "MULTIPART_LF_LINE",
    "MULTIPART_CRLF_LF_LINES",
    "MULTIPART_HEADER_FOLDING",
    "MULTIPART_INVALID_QUOTING",
    "MULTIPART_INVALID_PART",
    "MULTIPART_BOUNDARY_QUOTED",
    "MULTIPART_BOUNDARY_WHITESPACE",
    "MULTIPART_MISSING_SEMICOLON",
    "XML:/*",
    "XML://@*",
]
# ModSecurity leaves these unset (empty) where this engine says 0, and prints ARGS_COMBINED_SIZE as "12.000000".
NUMERIC = {"ARGS_COMBINED_SIZE", "REQUEST_BODY_LENGTH", "FILES_COMBINED_SIZE"}


@pytest.fixture(scope="module")
def modsecurity(reference_modsecurity: ModSecurity, tmp_path_factory: pytest.TempPathFactory) -> ModSecurityVariables:
    log = tmp_path_factory.mktemp("modsecurity") / "debug.log"
    return ModSecurityVariables(reference_modsecurity, log, DIFFERENTIAL_VARIABLES)


def ours(variables: RequestVariables, name: str) -> list[tuple[str, bytes]]:
    if name.startswith("XML:"):
        return [(name, value) for _, value in variables.xml(name[4:].encode())]
    pairs = variables.collection(name)
    if len(pairs) == 1 and pairs[0][0] == b"" and name not in COLLECTIONS:
        return [(name, pairs[0][1])]
    return [(f"{name}:{key.decode('utf-8', 'replace')}", value) for key, value in pairs]


COLLECTIONS = {"ARGS", "ARGS_NAMES", "ARGS_GET", "ARGS_POST", "REQUEST_HEADERS", "REQUEST_COOKIES"}
COLLECTIONS |= {"REQUEST_COOKIES_NAMES", "FILES", "FILES_NAMES", "FILES_SIZES", "MULTIPART_PART_HEADERS"}


def number(value: bytes) -> int:
    return int(float(value)) if value else 0


def assert_agrees(modsecurity: ModSecurityVariables, http_request: HttpRequest) -> None:
    theirs = modsecurity.values(http_request)
    variables = RequestVariables(http_request, body_limit=13107200)
    for name in DIFFERENTIAL_VARIABLES:
        mine = ours(variables, name)
        reference = theirs[name]
        if name in NUMERIC:
            assert [number(value) for _, value in mine] == [number(prefix) for _, _, prefix in reference], name
            continue
        unmatched = list(mine)
        for logged, whole, prefix in reference:
            candidates = [
                pair
                for pair in unmatched
                if (name.startswith("XML:") or pair[0] == logged)
                and (pair[1] == whole if whole is not None else pair[1].startswith(prefix))
            ]
            assert candidates, f"{name}: libmodsecurity has {logged}={whole or prefix!r}, this engine {mine!r}"
            unmatched.remove(candidates[0])
        assert not unmatched, f"{name}: only this engine has {unmatched!r}"


MP = b"multipart/form-data; boundary=B"
DIFFERENTIAL_CASES = [
    request(b"/a%20b/c%3f.php?x=1&y=%41+b&z&&=q&x=%zz%2"),
    request(b"http://Host.com:80/p%61th/x.php?a=%2fb#frag"),
    request(b"/a#f?x=1", headers=((b"Cookie", b' a=1; b = 2 ;c=x=y;;d; =e;f="q;r" '), (b"cookie", b"g=%41+b"))),
    request(b"/?q=1", method=b"POST", body=b"a=1&b=%zz&&c&a=2&", content_type=b"application/x-www-form-urlencoded"),
    request(
        method=b"POST", body=b'{"a":{"b":[1,2.50,{"c":true}],"e":{}},"g":null,"":"k"}', content_type=b"application/json"
    ),
    request(method=b"POST", body=b'{"a":1, bad', content_type=b"application/json"),
    request(
        method=b"POST", body=b'<r a="1" b="&lt;2"><b c="3">t1<![CDATA[cd]]></b>&amp;t2</r>', content_type=b"text/xml"
    ),
    request(method=b"POST", body=b'<a x="1"><b y="2">x</c>tail</a>', content_type=b"application/xml"),
    request(
        method=b"POST",
        content_type=MP,
        body=b'pre\r\n--B\r\nContent-Disposition: form-data; name="a"\r\n\r\nl1\r\nl2\r\n'
        b'--B\r\nContent-Disposition: form-data; name="f"; filename="x\\"y.php"\r\nContent-Type: text/plain\r\n\r\n'
        b"<?php\r\n\r\n--B\r\ncontent-disposition: form-data;\r\n name=c\r\n\r\nv\n--B--\r\npost",
    ),
    request(
        method=b"POST",
        content_type=b'multipart/form-data boundary="B"',
        body=b'--B\r\nContent-Disposition: form-data; name="a"\r\n\r\nva\r\n--B\r\nX: y\r\n\r\nvb\r\n--B--',
    ),
]


@pytest.mark.parametrize("http_request", DIFFERENTIAL_CASES)
def test_agrees_with_libmodsecurity(modsecurity: ModSecurityVariables, http_request: HttpRequest) -> None:
    assert_agrees(modsecurity, http_request)


NAME_SAFE = st.lists(
    st.sampled_from([b"a", b"=", b"&", b"%41", b"%zz", b"+", b";", b" ", b"'", b'"', b"\\", b"/", b"?"]), max_size=10
)
PART_SEEDS = [b"--B", b"--B--", b"\r\n", b"\n", b"Content-Disposition: form-data; ", b'name="a"', b'; filename="f"']
PART_SEEDS += [
    b"X: y",
    b"a",
    b" ",
    b"'",
    b'"',
    b"{",
    b'"k":',
    b"1",
    b"[",
    b"]",
    b"}",
    b",",
    b"<a",
    b">",
    b"</a>",
    b'x="1"',
]


@settings(max_examples=150, deadline=None)
@given(
    target=NAME_SAFE.map(lambda pieces: b"/p" + b"".join(pieces)),
    cookie=NAME_SAFE.map(b"".join),
    body=st.lists(st.sampled_from(PART_SEEDS), max_size=16).map(b"".join),
    content_type=st.sampled_from([MP, b"application/json", b"application/xml", b"application/x-www-form-urlencoded"]),
)
def test_agrees_with_libmodsecurity_on_generated_requests(
    modsecurity: ModSecurityVariables, target: bytes, cookie: bytes, body: bytes, content_type: bytes
) -> None:
    http_request = request(target, method=b"POST", headers=((b"Cookie", cookie),), body=body, content_type=content_type)
    # A name holding a line break would split the oracle's log line.
    names = RequestVariables(http_request).collection("ARGS_NAMES")
    assume(not any(b"\r" in name or b"\n" in name for name, _ in names))
    # libxml2's push parser keeps some start tags cut off by the end of the body and not others; not mimicked.
    assume(content_type != b"application/xml" or body.rfind(b">") > body.rfind(b"<"))
    assert_agrees(modsecurity, http_request)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (b"application/x-www-form-urlencoded", b"&".join(b"a%d=b" % i for i in range(3000))),
        (b"application/json", b"[" + b",".join([b'{"a":1}'] * 3000) + b"]"),
        (b"application/json", b"[" + b"1," * 3000 + b"x"),  # not JSON: the slow path stops at the limit too
    ],
    ids=["urlencoded", "json", "broken json"],
)
def test_argument_collections_hold_the_first_thousand(content_type: bytes, body: bytes) -> None:
    from edgeplane.seclang.request_body import ARGUMENTS_LIMIT

    variables = RequestVariables(
        HttpRequest(
            method=b"POST",
            target=b"/?q=1",
            protocol=b"HTTP/1.1",
            headers=((b"content-type", content_type),),
            body=body,
        )
    )
    arguments = variables.collection("ARGS")
    assert len(arguments) == ARGUMENTS_LIMIT
    assert arguments[0] == (b"q", b"1")  # the query's come first
    assert len(variables.collection("ARGS_NAMES")) == ARGUMENTS_LIMIT
