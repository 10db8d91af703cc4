"""``destination_conf``: where a Logpush job sends its batches, parsed and checked.

Supported (``MAX_DESTINATION_CONF_LENGTH`` characters at most):

- ``file:///absolute/directory`` (also ``file://localhost/...``): a directory on this machine, the embedded default.
  No query parameters.
- ``s3://bucket/optional/prefix?region=R``: Amazon S3 or an S3-compatible store. ``region`` is required. For an
  S3-compatible store add ``endpoint=`` (``host[:port]`` or an ``http(s)://`` URL; a bare host means https) and the
  credentials ``access-key-id=`` and ``secret-access-key=`` (both or neither). ``sse=AES256`` or ``sse=aws:kms``
  asks for server-side encryption (edgeplane's decision; other values are refused). Any other parameter is an error.
- ``https://host[:port]/path?header_X=value``: parameters named ``header_*`` become request headers (``X: value``)
  and are removed from the URL; the URL's other parameters are kept in order.

``r2://``, ``gs://``, ``azure://``, ``sumo://``, ``splunk://`` and ``datadog://`` are recognised and refused as not
supported by this edgeplane; any other scheme is unknown.

Hosts are ASCII names (international names in their ``xn--`` form) or IP addresses; whether an address may be
reached is not decided here but by the operator's policy (``edgeplane.logs.destinations.address_guard``), which
``host_address`` helps by reading every form of IPv4 address a resolver accepts. ``https://`` destinations take at
most ``MAX_HEADERS`` ``header_*`` parameters. Secrets (the S3 secret key, header values) never appear in ``repr()``
or ``str()`` of the parsed destination; ``redacted()`` gives the conf with them replaced, for logs and error
messages.

``{DATE}`` in a path or prefix stands for the batch's UTC date as ``YYYYMMDD`` (``expand_date``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Final, TypeAlias
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from edgeplane.logs.errors import DestinationError

MAX_DESTINATION_CONF_LENGTH: Final = 4096
MAX_HEADERS: Final = 20
DATE_PLACEHOLDER: Final = "{DATE}"
UNSUPPORTED_SCHEMES: Final = frozenset({"r2", "gs", "azure", "sumo", "splunk", "datadog"})
SSE_VALUES: Final = ("AES256", "aws:kms")
REDACTED: Final = "REDACTED"

_BUCKET: Final = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HOST_NAME: Final = re.compile(r"[a-z0-9_.-]+")
_SHORTHAND_IPV4: Final = re.compile(r"[0-9a-fx.]+")


class Secret:
    """A string that does not show itself: ``repr`` and ``str`` give ``REDACTED``; ``reveal()`` gives the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret value, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class Headers(Mapping[str, str]):
    """Request headers whose values are secrets: a read-only mapping of name to value whose ``repr`` shows only the
    names."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str]) -> None:
        self._items = dict(items)

    def __getitem__(self, name: str) -> str:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return "Headers({" + ", ".join(f"{name!r}: {REDACTED!r}" for name in self._items) + "})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Headers) and other._items == self._items

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items.items())))


@dataclass(frozen=True, slots=True)
class FileDestination:
    """A directory on this machine; ``directory`` is absolute and may hold ``{DATE}``."""

    directory: str

    def redacted(self) -> str:
        """The conf, with nothing secret in it."""
        return f"file://{quote(self.directory, safe='/{}')}"


@dataclass(frozen=True, slots=True)
class S3Destination:
    """An S3 bucket (or a bucket of an S3-compatible store when ``endpoint`` is set)."""

    bucket: str
    prefix: str
    region: str
    endpoint: str | None = None
    access_key_id: str | None = None
    secret_access_key: Secret | None = field(default=None, repr=False)
    sse: str | None = None

    def redacted(self) -> str:
        """The conf with the secret key replaced by ``REDACTED``."""
        query = [("region", self.region)]
        if self.endpoint is not None:
            query.append(("endpoint", self.endpoint))
        if self.access_key_id is not None:
            query.append(("access-key-id", self.access_key_id))
        if self.secret_access_key is not None:
            query.append(("secret-access-key", REDACTED))
        if self.sse is not None:
            query.append(("sse", self.sse))
        path = quote(self.prefix, safe="/{}")
        return f"s3://{self.bucket}{'/' + path if path else ''}?{urlencode(query)}"


@dataclass(frozen=True, slots=True)
class HttpsDestination:
    """An HTTPS endpoint: ``url`` without the ``header_*`` parameters, and the headers they named."""

    url: str
    headers: Headers = field(default_factory=lambda: Headers({}))

    def redacted(self) -> str:
        """The conf with every header value replaced by ``REDACTED``."""
        parts = urlsplit(self.url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        query += [(f"header_{name}", REDACTED) for name in self.headers]
        return urlunsplit(parts._replace(query=urlencode(query)))


Destination: TypeAlias = FileDestination | S3Destination | HttpsDestination


def parse_destination_conf(conf: str) -> Destination:
    """The destination ``conf`` names; raises ``DestinationError`` saying what is wrong, for a conf that is too long,
    malformed, of an unsupported or unknown scheme, or missing a required parameter. Whether the destination may be
    reached is the policy's question (``DestinationPolicy.admit``)."""
    if not isinstance(conf, str):
        raise DestinationError("destination_conf must be a string")
    if len(conf) > MAX_DESTINATION_CONF_LENGTH:
        raise DestinationError(
            f"destination_conf is {len(conf)} characters long; at most {MAX_DESTINATION_CONF_LENGTH} are allowed"
        )
    if not conf:
        raise DestinationError("destination_conf is empty")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in conf):
        raise DestinationError("destination_conf must not contain white space or control characters")
    scheme, separator, _ = conf.partition("://")
    if not separator or not scheme:
        raise DestinationError("destination_conf must be a URL of the form <scheme>://...")
    scheme = scheme.lower()
    if scheme in UNSUPPORTED_SCHEMES:
        raise DestinationError(f"destination scheme {scheme}:// is not supported by this edgeplane")
    try:
        parts = urlsplit(conf)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError as error:
        raise DestinationError(f"destination_conf is not a valid URL: {error}") from None
    if parts.fragment:
        raise DestinationError("destination_conf must not have a fragment (#...)")
    if parts.username is not None or parts.password is not None:
        raise DestinationError("destination_conf must not carry credentials in the URL (user:password@)")
    if scheme == "file":
        return _file(parts.netloc, parts.path, parts.query)
    if scheme == "s3":
        return _s3(parts.netloc, parts.path, parts.query)
    if scheme == "https":
        return _https(conf, parts.hostname)
    if scheme == "http":
        raise DestinationError("destination scheme http:// is not supported; use https://")
    raise DestinationError(f"unknown destination scheme {scheme}://; supported: file://, s3://, https://")


def expand_date(template: str, when: date | datetime) -> str:
    """``template`` with every ``{DATE}`` replaced by ``when``'s date as ``YYYYMMDD`` (a datetime is first converted
    to UTC; a naive one is taken as UTC)."""
    if isinstance(when, datetime) and when.tzinfo is not None:
        when = when.astimezone(UTC)
    return template.replace(DATE_PLACEHOLDER, when.strftime("%Y%m%d"))


def _file(netloc: str, path: str, query: str) -> FileDestination:
    if netloc not in ("", "localhost"):
        raise DestinationError("file:// destinations need an absolute path: file:///absolute/directory")
    if query:
        raise DestinationError("file:// destinations take no parameters")
    if not path.startswith("/"):
        raise DestinationError("file:// destinations need an absolute path: file:///absolute/directory")
    directory = unquote(path)
    if "\x00" in directory or any(segment == ".." for segment in directory.split("/")):
        raise DestinationError("file:// destination path must not contain '..' segments or NUL")
    return FileDestination(directory=directory)


def _parameters(query: str, scheme: str) -> dict[str, str]:
    values: dict[str, str] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise DestinationError(f"{scheme}:// destination has a malformed query string") from None
    for name, value in pairs:
        if name in values:
            raise DestinationError(f"{scheme}:// destination parameter {name} is given more than once")
        values[name] = value
    return values


def _s3(netloc: str, path: str, query: str) -> S3Destination:
    bucket = netloc
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise DestinationError(
            f"s3:// bucket name {bucket!r} is not valid: 3 to 63 lowercase letters, digits, dots and hyphens"
        )
    params = _parameters(query, "s3")
    allowed = ("region", "endpoint", "access-key-id", "secret-access-key", "sse")
    for name in params:
        if name not in allowed:
            raise DestinationError(f"s3:// destination parameter {name} is unknown; expected {', '.join(allowed)}")
    region = params.get("region")
    if not region:
        raise DestinationError("s3:// destination needs ?region=<region>")
    if not _REGION.fullmatch(region):
        raise DestinationError(f"s3:// region {region!r} is not valid")
    endpoint = params.get("endpoint")
    if endpoint is not None:
        endpoint = _endpoint(endpoint)
    key_id, secret = params.get("access-key-id"), params.get("secret-access-key")
    if (key_id is None) != (secret is None):
        raise DestinationError("s3:// destination needs both access-key-id and secret-access-key, or neither")
    if key_id == "" or secret == "":
        raise DestinationError("s3:// destination credentials must not be empty")
    sse = params.get("sse")
    if sse is not None and sse not in SSE_VALUES:
        raise DestinationError(f"s3:// destination parameter sse must be one of {', '.join(SSE_VALUES)}")
    prefix = unquote(path).strip("/")
    return S3Destination(
        bucket=bucket,
        prefix=prefix,
        region=region,
        endpoint=endpoint,
        access_key_id=key_id,
        secret_access_key=Secret(secret) if secret is not None else None,
        sse=sse,
    )


def _endpoint(endpoint: str) -> str:
    url = endpoint if "://" in endpoint else f"https://{endpoint}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise DestinationError(f"s3:// endpoint {endpoint!r} is not a valid host or URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DestinationError(f"s3:// endpoint {endpoint!r} must be host[:port] or an http(s):// URL")
    if parts.username is not None or parts.query or parts.fragment:
        raise DestinationError(f"s3:// endpoint {endpoint!r} must be host[:port] or an http(s):// URL")
    _check_host_syntax(parts.hostname, "s3:// endpoint")
    return url.rstrip("/")


def _https(conf: str, hostname: str | None) -> HttpsDestination:
    if not hostname:
        raise DestinationError("https:// destination needs a host")
    _check_host_syntax(hostname, "https:// destination")
    parts = urlsplit(conf)
    params: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise DestinationError("https:// destination has a malformed query string") from None
    for name, value in pairs:
        if not name.startswith("header_"):
            params.append((name, value))
            continue
        header = name.removeprefix("header_")
        if not _HEADER_NAME.fullmatch(header):
            raise DestinationError(f"https:// destination parameter {name}: {header!r} is not a valid header name")
        if any(char in value for char in "\r\n\x00"):
            raise DestinationError(f"https:// destination header {header} has a line break in its value")
        if header.lower() in (existing.lower() for existing in headers):
            raise DestinationError(f"https:// destination header {header} is given more than once")
        if len(headers) == MAX_HEADERS:
            raise DestinationError(f"https:// destination has more than {MAX_HEADERS} header_* parameters")
        headers[header] = value
    url = urlunsplit(("https", parts.netloc, parts.path or "/", urlencode(params), ""))
    return HttpsDestination(url=url, headers=Headers(headers))


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` (a URL's host: IPv6 in brackets or not, a trailing dot allowed) stands for without any
    DNS: an IP literal, or one of the shorthand IPv4 forms resolvers accept (``2130706433``, ``0x7f.1``, ``127.1``,
    ``0177.0.0.1``); an IPv4-mapped IPv6 address is given as is. ``None`` for a name."""
    text = host.strip("[]").rstrip(".").lower()
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _SHORTHAND_IPV4.fullmatch(text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def _check_host_syntax(hostname: str, what: str) -> None:
    # urlsplit gives the host lowercased and without brackets. Only plain ASCII names reach a resolver: a name in
    # other characters could be normalised into an address (fullwidth digits become ASCII digits under IDNA).
    if ":" in hostname:
        try:
            ipaddress.IPv6Address(hostname)
        except ValueError:
            raise DestinationError(f"{what} host [{hostname}] is not a valid IPv6 address") from None
        if "%" in hostname:
            raise DestinationError(f"{what} host [{hostname}]: IPv6 zone identifiers are not supported")
        return
    if not _HOST_NAME.fullmatch(hostname) or ".." in hostname:
        raise DestinationError(
            f"{what} host {hostname!r} must be an IP address or an ASCII host name (international names in their "
            "xn-- form)"
        )
