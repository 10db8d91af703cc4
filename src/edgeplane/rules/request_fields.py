"""The values of the HTTP fields for one request, as attributes named after the fields (``http.request.uri.path``
is ``http_request_uri_path``), so that a compiled expression reads a field with one attribute lookup.

Cheap fields are set when the object is built (``from_http``); fields that cost a parse (header and argument maps,
the body as text) are computed on first read and then stored on the instance, where later reads find them as plain
attributes. ``Bytes`` values are ``str`` (UTF-8, invalid bytes kept by ``surrogateescape``); ``ip.src`` is an address
key (``edgeplane.rules.addresses``). A field the request does not carry is the empty string, an empty array or map,
or 0, never missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, overload

from edgeplane.body_document import BodyDocument
from edgeplane.bounded_memo import BoundedMemo
from edgeplane.rules.addresses import client_key
from edgeplane.rules.jsonrpc_facts import JsonRpcFacts, read_jsonrpc

T = TypeVar("T")

NOT_SCORED = 100  # ``cf.waf.score*`` of a request that was not scored
_SCORE_FIELDS = ("cf_waf_score", "cf_waf_score_sqli", "cf_waf_score_xss", "cf_waf_score_rce")


class cached_field(Generic[T]):  # named like functools.cached_property, which it replaces
    """A field computed on first read and stored in the instance's ``__dict__``, where later reads find it as a plain
    attribute. Unlike ``functools.cached_property`` in Python 3.11 it takes no lock: a ``RequestFields`` belongs to one
    request on one thread, and the lock made every first read cost several times as much."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_field[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | cached_field[T]:
        if instance is None:
            return self
        value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _arguments(query: str) -> dict[str, list[str]]:
    """The query's arguments by name, values in order; neither names nor values are URL-decoded (as in Cloudflare:
    ``?q=a+b`` gives ``["a+b"]``; use ``url_decode`` in the expression)."""
    arguments: dict[str, list[str]] = {}
    if not query:
        return arguments
    for part in query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        arguments.setdefault(name, []).append(value)
    return arguments


def _extension(path: str) -> str:
    last = path.rsplit("/", 1)[-1]
    return last.rsplit(".", 1)[1].lower() if "." in last else ""


def _not_scored(request: RequestFields) -> tuple[int, int, int, int]:
    return NOT_SCORED, NOT_SCORED, NOT_SCORED, NOT_SCORED


def _jsonrpc_without_costs(request: RequestFields) -> JsonRpcFacts:
    return read_jsonrpc(request.body_document, request.http_request_uri_path)


class RequestFields:
    """The fields of one request. Build it with ``from_http``; the WAF engine may set ``cf_bot_management_score``
    and ``cf_threat_score``.

    The attack scores ``cf.waf.score*`` (1..99, 100 when not computed) are computed on their first read, all four at
    once, by ``attack_scorer``: a function of the request giving ``(overall, sqli, xss, rce)``. The WAF engine sets
    it on the requests it evaluates (``edgeplane.waf.attack_scores``); without one every score is 100. A score set
    beforehand (``waf_score = 12``) is kept. ``core_evaluation`` is the WAF engine's: the OWASP Core Rule Set's
    evaluation of the request, kept so that scoring and the managed phase run the CRS once. ``body_document`` is the
    body's JSON reading: the edge's, which the gateway reads too, so that a request's body is parsed once.

    The ``edgeplane.jsonrpc.*`` fields are read, all at once and on the first read of any of them, by
    ``jsonrpc_reader``: a function of the request giving its ``JsonRpcFacts``. The edge sets the gateway's (which
    prices the calls: ``edgeplane.gateway.request_facts``); the default reads the same facts from the body with a
    cost of 0, so that rules work without a gateway.

    The ``http.response.*`` fields, which only a counting expression may name, are the answer's, once
    ``set_response`` gave it; before, the code is 0 and the headers none."""

    attack_scorer: Callable[[RequestFields], tuple[int, int, int, int]] = staticmethod(_not_scored)
    jsonrpc_reader: Callable[[RequestFields], JsonRpcFacts] = staticmethod(_jsonrpc_without_costs)
    core_evaluation: Any = None

    # Fields of the same value for every request, kept on the class so that a request pays nothing for them.
    # edgeplane terminates no TLS at the edge: there is no client hello to fingerprint.
    cf_bot_management_ja3_hash = ""
    cf_bot_management_ja4 = ""

    # The answer's fields (``set_response``): the class's defaults until the answer is known.
    http_response_code = 0
    raw_response_headers: Sequence[tuple[bytes, bytes]] = ()

    def __init__(self) -> None:
        self.http_host = ""
        self.http_request_method = ""
        self.http_request_version = ""
        self.http_request_uri = ""
        self.http_request_uri_path = ""
        self.http_request_uri_query = ""
        self.http_request_full_uri = ""
        self.http_request_body_size = 0
        self.http_request_body_truncated = False
        self.http_request_headers_truncated = False
        self.ip_src = 0
        self.ip_src_country = ""
        self.ip_src_asnum = 0
        self.ssl = False
        self.cf_ray_id = ""
        self.cf_edge_server_port = 0
        self.cf_bot_management_score = 0
        self.cf_bot_management_verified_bot = False
        self.cf_client_bot = False
        self.cf_threat_score = 0
        self.client_ip = ""
        self.client_port = 0
        self.raw_headers: Sequence[tuple[bytes, bytes]] = ()
        self.raw_body = b""

    @classmethod
    def from_http(
        cls,
        *,
        method: str,
        scheme: str,
        host: str,
        raw_path: str,
        query: str,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
        client_ip: str,
        client_port: int = 0,
        server_port: int = 80,
        http_version: str = "1.1",
        country: str = "",
        asn: int = 0,
        ray_id: str = "",
        body_truncated: bool = False,
        body_document: BodyDocument | None = None,
    ) -> RequestFields:
        """The fields of a request as the edge received it: ``raw_path`` and ``query`` as on the request line
        (``query`` without ``?``), ``headers`` with lower-case names in order, ``body`` as read (possibly cut at
        the inspection limit, then ``body_truncated``); ``body_document``: the JSON reading of these same bytes
        that the caller shares with the body's other readers (without one, the fields make their own on first
        need). Never raises for any input of these types."""
        fields = cls()
        fields.http_host = host
        fields.http_request_method = method
        fields.http_request_version = f"HTTP/{http_version}"
        uri = f"{raw_path}?{query}" if query else raw_path
        fields.http_request_uri = uri
        fields.http_request_uri_path = raw_path
        fields.http_request_uri_query = query
        fields.http_request_full_uri = f"{scheme}://{host}{uri}"
        fields.http_request_body_size = len(body)
        fields.http_request_body_truncated = body_truncated
        fields.ip_src = client_key(client_ip)
        fields.ip_src_country = country
        fields.ip_src_asnum = asn
        fields.ssl = scheme == "https"
        fields.cf_ray_id = ray_id
        fields.cf_edge_server_port = server_port
        fields.client_ip = client_ip
        fields.client_port = client_port
        fields.raw_headers = headers
        fields.raw_body = body
        if body_document is not None:
            fields.body_document = body_document
        return fields

    # The attack scores: computed on first read (``_score_attacks``), under the names the WAF engine uses as well;
    # compiled expressions read the cf_* attributes.

    def _score_attacks(self) -> None:
        """Stores the four scores the ``attack_scorer`` gives, keeping any already set."""
        found = self.__dict__
        for name, value in zip(_SCORE_FIELDS, self.attack_scorer(self), strict=True):
            found.setdefault(name, value)

    @cached_field
    def cf_waf_score(self) -> int:
        """``cf.waf.score``."""
        self._score_attacks()
        return self.__dict__["cf_waf_score"]  # type: ignore[no-any-return]

    @cached_field
    def cf_waf_score_sqli(self) -> int:
        """``cf.waf.score.sqli``."""
        self._score_attacks()
        return self.__dict__["cf_waf_score_sqli"]  # type: ignore[no-any-return]

    @cached_field
    def cf_waf_score_xss(self) -> int:
        """``cf.waf.score.xss``."""
        self._score_attacks()
        return self.__dict__["cf_waf_score_xss"]  # type: ignore[no-any-return]

    @cached_field
    def cf_waf_score_rce(self) -> int:
        """``cf.waf.score.rce``."""
        self._score_attacks()
        return self.__dict__["cf_waf_score_rce"]  # type: ignore[no-any-return]

    @property
    def attack_scores_computed(self) -> bool:
        """Whether the scores were computed for this request (something read one of them), or ``cf.waf.score``
        was set."""
        return "cf_waf_score" in self.__dict__

    @property
    def waf_score(self) -> int:
        """``cf.waf.score``."""
        return self.cf_waf_score

    @waf_score.setter
    def waf_score(self, value: int) -> None:
        self.cf_waf_score = value

    @property
    def waf_score_sqli(self) -> int:
        """``cf.waf.score.sqli``."""
        return self.cf_waf_score_sqli

    @waf_score_sqli.setter
    def waf_score_sqli(self, value: int) -> None:
        self.cf_waf_score_sqli = value

    @property
    def waf_score_xss(self) -> int:
        """``cf.waf.score.xss``."""
        return self.cf_waf_score_xss

    @waf_score_xss.setter
    def waf_score_xss(self, value: int) -> None:
        self.cf_waf_score_xss = value

    @property
    def waf_score_rce(self) -> int:
        """``cf.waf.score.rce``."""
        return self.cf_waf_score_rce

    @waf_score_rce.setter
    def waf_score_rce(self, value: int) -> None:
        self.cf_waf_score_rce = value

    # The edgeplane.jsonrpc.* fields: read on first need, all from one ``jsonrpc_reader`` call.

    @cached_field
    def jsonrpc_facts(self) -> JsonRpcFacts:
        """What the request says as JSON-RPC: ``jsonrpc_reader``'s answer, asked once."""
        return self.jsonrpc_reader(self)

    @cached_field
    def edgeplane_jsonrpc_methods(self) -> list[str]:
        """``edgeplane.jsonrpc.methods``."""
        return list(self.jsonrpc_facts.methods)

    @cached_field
    def edgeplane_jsonrpc_batch(self) -> bool:
        """``edgeplane.jsonrpc.batch``."""
        return self.jsonrpc_facts.batch

    @cached_field
    def edgeplane_jsonrpc_batch_size(self) -> int:
        """``edgeplane.jsonrpc.batch_size``."""
        return self.jsonrpc_facts.batch_size

    @cached_field
    def edgeplane_jsonrpc_network(self) -> str:
        """``edgeplane.jsonrpc.network``."""
        return self.jsonrpc_facts.network

    @cached_field
    def edgeplane_jsonrpc_addresses(self) -> list[str]:
        """``edgeplane.jsonrpc.addresses``."""
        return list(self.jsonrpc_facts.addresses)

    @cached_field
    def edgeplane_jsonrpc_cost(self) -> int:
        """``edgeplane.jsonrpc.cost``."""
        return self.jsonrpc_facts.cost

    # The answer's fields, for a counting expression evaluated after the answer.

    def set_response(self, code: int, headers: Sequence[tuple[bytes, bytes]]) -> None:
        """Gives the request its answer: ``code`` is ``http.response.code``, ``headers`` (lower-case names, in
        order) the ``http.response.headers*`` and ``http.response.content_type.media_type`` fields, decoded on their
        first read. A second call replaces the first."""
        self.http_response_code = code
        self.raw_response_headers = headers
        found = self.__dict__
        for name in _RESPONSE_HEADER_FIELDS:
            found.pop(name, None)

    def _index_response_headers(self) -> None:
        fields = _header_fields(self.raw_response_headers)
        content_types = fields["http_request_headers"].get("content-type")
        self.__dict__.update(
            http_response_headers=fields["http_request_headers"],
            http_response_headers_names=fields["http_request_headers_names"],
            http_response_headers_values=fields["http_request_headers_values"],
            http_response_content_type_media_type=(
                content_types[0].split(";")[0].strip().lower() if content_types else ""
            ),
        )

    @cached_field
    def http_response_headers(self) -> dict[str, list[str]]:
        """``http.response.headers``: values by lower-case name."""
        self._index_response_headers()
        return self.__dict__["http_response_headers"]  # type: ignore[no-any-return]

    @cached_field
    def http_response_headers_names(self) -> list[str]:
        """``http.response.headers.names``: one per header line, in order."""
        self._index_response_headers()
        return self.__dict__["http_response_headers_names"]  # type: ignore[no-any-return]

    @cached_field
    def http_response_headers_values(self) -> list[str]:
        """``http.response.headers.values``: one per header line, in order."""
        self._index_response_headers()
        return self.__dict__["http_response_headers_values"]  # type: ignore[no-any-return]

    @cached_field
    def http_response_content_type_media_type(self) -> str:
        """``http.response.content_type.media_type``: the answer's Content-Type without parameters, lower case."""
        self._index_response_headers()
        return self.__dict__["http_response_content_type_media_type"]  # type: ignore[no-any-return]

    # Fields computed on first read. The raw.* fields equal the others: edgeplane does not normalize URLs.

    def _index_headers(self) -> None:
        """Decodes the header lines once, storing every header-derived field at the same time: the WAF reads
        most of them on every request, and one pass costs about what a single field did. Header lines recur from
        request to request, so the fields of recent ones are remembered (``_HEADER_FIELDS``; shared, read only)."""
        raw = self.raw_headers
        self.__dict__.update(_HEADER_FIELDS(tuple(raw)) if len(raw) <= _MAX_REMEMBERED_HEADERS else _header_fields(raw))

    @cached_field
    def http_request_headers(self) -> dict[str, list[str]]:
        """Header values by lower-case name, in order."""
        self._index_headers()
        return self.__dict__["http_request_headers"]  # type: ignore[no-any-return]

    @cached_field
    def http_request_headers_names(self) -> list[str]:
        """Header names (lower case), one per header line, in order."""
        self._index_headers()
        return self.__dict__["http_request_headers_names"]  # type: ignore[no-any-return]

    @cached_field
    def http_request_headers_values(self) -> list[str]:
        """Header values, one per header line, in order."""
        self._index_headers()
        return self.__dict__["http_request_headers_values"]  # type: ignore[no-any-return]

    def _header(self, name: str) -> str:
        values = self.http_request_headers.get(name)
        return values[0] if values else ""

    @cached_field
    def http_user_agent(self) -> str:
        """The first User-Agent header."""
        self._index_headers()
        return self.__dict__["http_user_agent"]  # type: ignore[no-any-return]

    @cached_field
    def http_referer(self) -> str:
        """The first Referer header."""
        self._index_headers()
        return self.__dict__["http_referer"]  # type: ignore[no-any-return]

    @cached_field
    def http_x_forwarded_for(self) -> str:
        """The X-Forwarded-For headers, joined with commas."""
        self._index_headers()
        return self.__dict__["http_x_forwarded_for"]  # type: ignore[no-any-return]

    @cached_field
    def http_cookie(self) -> str:
        """The Cookie headers, joined with ``; ``."""
        self._index_headers()
        return self.__dict__["http_cookie"]  # type: ignore[no-any-return]

    @cached_field
    def http_request_cookies(self) -> dict[str, list[str]]:
        """Cookie values by name."""
        cookies: dict[str, list[str]] = {}
        for part in self.http_cookie.split(";"):
            name, separator, value = part.strip().partition("=")
            if separator:
                cookies.setdefault(name, []).append(value)
        return cookies

    @cached_field
    def http_request_accepted_languages(self) -> list[str]:
        """The Accept-Language entries, in the order written (without their quality values)."""
        header = ",".join(self.http_request_headers.get("accept-language", ()))
        return [entry.split(";")[0].strip() for entry in header.split(",") if entry.split(";")[0].strip()]

    @cached_field
    def http_request_uri_args(self) -> dict[str, list[str]]:
        """Query arguments by name (not URL-decoded)."""
        return _arguments(self.http_request_uri_query)

    @cached_field
    def http_request_uri_args_names(self) -> list[str]:
        """Query argument names, one per argument, in order."""
        return [part.partition("=")[0] for part in self.http_request_uri_query.split("&") if part]

    @cached_field
    def http_request_uri_args_values(self) -> list[str]:
        """Query argument values, one per argument, in order."""
        return [part.partition("=")[2] for part in self.http_request_uri_query.split("&") if part]

    @cached_field
    def http_request_uri_path_extension(self) -> str:
        """The lower-case extension of the path's last segment, without the dot."""
        return _extension(self.http_request_uri_path)

    @cached_field
    def http_request_body_raw(self) -> str:
        """The body (as read, up to the inspection limit)."""
        return _text(self.raw_body)

    @cached_field
    def body_document(self) -> BodyDocument:
        """The body's JSON reading (``edgeplane.body_document``), for the engine's readers of a JSON body's
        document (the attack scores): no field of the Rules language."""
        return BodyDocument(self.raw_body)

    @cached_field
    def http_request_body_mime(self) -> str:
        """The media type the Content-Type header declares, lower case (edgeplane does not sniff bodies)."""
        return self._header("content-type").split(";")[0].strip().lower()

    @cached_field
    def http_request_timestamp_sec(self) -> int:
        """The time the field was first read, in Unix seconds."""
        return int(time.time())

    @property
    def raw_http_request_uri(self) -> str:
        """As ``http.request.uri``."""
        return self.http_request_uri

    @property
    def raw_http_request_uri_path(self) -> str:
        """As ``http.request.uri.path``."""
        return self.http_request_uri_path

    @property
    def raw_http_request_uri_path_extension(self) -> str:
        """As ``http.request.uri.path.extension``."""
        return self.http_request_uri_path_extension

    @property
    def raw_http_request_uri_query(self) -> str:
        """As ``http.request.uri.query``."""
        return self.http_request_uri_query

    @property
    def raw_http_request_full_uri(self) -> str:
        """As ``http.request.full_uri``."""
        return self.http_request_full_uri

    @property
    def raw_http_request_uri_args(self) -> dict[str, list[str]]:
        """As ``http.request.uri.args``."""
        return self.http_request_uri_args

    @property
    def raw_http_request_uri_args_names(self) -> list[str]:
        """As ``http.request.uri.args.names``."""
        return self.http_request_uri_args_names

    @property
    def raw_http_request_uri_args_values(self) -> list[str]:
        """As ``http.request.uri.args.values``."""
        return self.http_request_uri_args_values


def _header_fields(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The header-derived fields of a request's header lines (see ``RequestFields._index_headers``)."""
    # One decode of all names and one of all values: a header line cannot hold a line feed, so joining on it and
    # splitting again is exact, and costs a fraction of decoding each line apart.
    names = b"\n".join([name for name, _ in raw]).decode("utf-8", "surrogateescape").lower().split("\n")
    values = b"\n".join([value for _, value in raw]).decode("utf-8", "surrogateescape").split("\n")
    if not raw:
        names, values = [], []
    headers: dict[str, list[str]] = {}
    for name, value in zip(names, values, strict=True):
        found = headers.get(name)
        if found is None:
            headers[name] = [value]
        else:
            found.append(value)
    cookies = headers.get("cookie")
    forwarded = headers.get("x-forwarded-for")
    user_agent = headers.get("user-agent")
    referer = headers.get("referer")
    return {
        "http_request_headers": headers,
        "http_request_headers_names": names,
        "http_request_headers_values": values,
        "http_user_agent": user_agent[0] if user_agent else "",
        "http_referer": referer[0] if referer else "",
        "http_x_forwarded_for": ", ".join(forwarded) if forwarded else "",
        "http_cookie": "; ".join(cookies) if cookies else "",
    }


_RESPONSE_HEADER_FIELDS = (
    "http_response_headers",
    "http_response_headers_names",
    "http_response_headers_values",
    "http_response_content_type_media_type",
)

_MAX_REMEMBERED_HEADERS = 64  # header lines of a request whose fields are remembered
_HEADER_FIELDS: BoundedMemo[tuple[tuple[bytes, bytes], ...], dict[str, Any]] = BoundedMemo(
    _header_fields,
    max_entries=64,
    max_length=_MAX_REMEMBERED_HEADERS,  # at most 64 heads of up to 64 KiB each
)
