"""The items of an account list, one shape per list kind, checked and put in canonical form.

An item carries exactly one member named after its list's kind, and an optional ``comment``:

- ``ip``: an IPv4 or IPv6 address, or a network in CIDR notation with no host bits set (IPv4 prefixes /8 to /32,
  IPv6 /12 to /64; a single IPv6 address is also accepted). ``10.0.0.1/32`` is the address ``10.0.0.1``.
- ``hostname``: ``{url_hostname, exclude_exact_hostname?}``; letters, digits and hyphens in dot-separated labels,
  lowercased, optionally starting with the wildcard label ``*.``.
- ``asn``: an integer from 0 to 4294967295.
- ``redirect``: ``{source_url, target_url, include_subdomains?, preserve_path_suffix?, preserve_query_string?,
  status_code?, subpath_matching?}``; the source is a host and path (a scheme may be written), the target an
  absolute http(s) URL; the flags default to false and the status code to 301.

Each item has a *key*, its identity in the list: the canonical address or network, the hostname, the ASN, the
redirect's source URL. A list holds one item per key.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from edgeplane.api.errors import ApiError, bad_request

KINDS = ("ip", "hostname", "asn", "redirect")
MAX_COMMENT_LENGTH = 500
MAX_URL_LENGTH = 2048
MAX_ASN = 2**32 - 1
REDIRECT_STATUS_CODES = (301, 302, 307, 308)

# Error codes of list items (documented in docs/api.md).
INVALID_ITEM = 10303
ITEM_KIND_MISMATCH = 10304

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOSTNAME = re.compile(rf"(?:\*\.)?(?:{_LABEL}\.)*{_LABEL}")
_REDIRECT_FLAGS = ("include_subdomains", "preserve_path_suffix", "preserve_query_string", "subpath_matching")
_REDIRECT_MEMBERS = frozenset({"source_url", "target_url", "status_code", *_REDIRECT_FLAGS})
_HOSTNAME_MEMBERS = frozenset({"url_hostname", "exclude_exact_hostname"})
_IPV4_PREFIXES = range(8, 33)
_IPV6_PREFIXES = range(12, 65)


@dataclass(frozen=True, slots=True)
class ListItem:
    """A checked item: its key in the list, the kind's member as the API shows it, and the comment."""

    key: str
    content: dict[str, Any]
    comment: str


def parse_item(value: Any, kind: str, pointer: str) -> ListItem:
    """The item ``value`` for a list of ``kind``. Raises a 400 pointing below ``pointer``: code 10304 when the item
    is of another kind than the list, 10303 when its value is not valid, 1001 for a member of the wrong type."""
    given = [member for member in KINDS if isinstance(value, dict) and member in value]
    if kind not in given and given:
        raise bad_request(
            f"the list holds {kind} items; this item is {_a(given[0])} item",
            code=ITEM_KIND_MISMATCH,
            pointer=f"{pointer}/{given[0]}",
        )
    value = _members(value, {kind, "comment"}, pointer, "each item must be an object")
    if kind not in value:
        raise bad_request(f"the item needs {kind!r}", pointer=f"{pointer}/{kind}")
    comment = value.get("comment") or ""
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT_LENGTH:
        raise bad_request(
            f"comment must be a string of at most {MAX_COMMENT_LENGTH} characters", pointer=f"{pointer}/comment"
        )
    member = f"{pointer}/{kind}"
    content: Any
    if kind == "ip":
        key, content = _ip(value["ip"], member)
    elif kind == "hostname":
        key, content = _hostname(value["hostname"], member)
    elif kind == "asn":
        key, content = _asn(value["asn"], member)
    else:
        key, content = _redirect(value["redirect"], member)
    return ListItem(key=key, content={kind: content}, comment=comment)


def _members(value: Any, allowed: frozenset[str] | set[str], pointer: str, shape: str) -> dict[str, Any]:
    """``value`` as an object with only ``allowed`` members; a 400 saying ``shape``, or naming the first unknown
    member, otherwise."""
    if not isinstance(value, dict):
        raise bad_request(shape, pointer=pointer)
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise bad_request(f"unknown field {unknown[0]!r}", pointer=f"{pointer}/{unknown[0]}")
    return value


def _flag(value: dict[str, Any], name: str, pointer: str) -> bool:
    """The boolean member ``name`` of ``value`` (false when absent)."""
    setting = value.get(name, False)
    if not isinstance(setting, bool):
        raise bad_request(f"{name} must be true or false", pointer=f"{pointer}/{name}")
    return setting


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _invalid(message: str, pointer: str) -> ApiError:
    return bad_request(message, code=INVALID_ITEM, pointer=pointer)


def _ip(value: Any, pointer: str) -> tuple[str, str]:
    if not isinstance(value, str):
        raise _invalid("ip must be an IP address or a CIDR network", pointer)
    try:
        network = ipaddress.ip_network(value.strip(), strict=True)
    except ValueError as error:
        raise _invalid(f"ip {value!r} is not an IP address or a CIDR network: {error}", pointer) from None
    single = network.prefixlen == network.max_prefixlen
    prefixes = _IPV4_PREFIXES if network.version == 4 else _IPV6_PREFIXES
    if not single and network.prefixlen not in prefixes:
        raise _invalid(
            f"ip {value!r}: an IPv{network.version} network's prefix must be from /{prefixes[0]} to /{prefixes[-1]}",
            pointer,
        )
    canonical = str(network.network_address) if single else str(network)
    return canonical, canonical


def _hostname(value: Any, pointer: str) -> tuple[str, dict[str, Any]]:
    value = _members(value, _HOSTNAME_MEMBERS, pointer, "hostname must be an object with url_hostname")
    name = value.get("url_hostname")
    if not isinstance(name, str) or len(name) > 253 or not _HOSTNAME.fullmatch(name.lower()):
        raise _invalid(
            "url_hostname must be a hostname: letters, digits and hyphens in dot-separated labels, optionally "
            "starting with '*.'",
            f"{pointer}/url_hostname",
        )
    content: dict[str, Any] = {"url_hostname": name.lower()}
    if "exclude_exact_hostname" in value:
        content["exclude_exact_hostname"] = _flag(value, "exclude_exact_hostname", pointer)
    return content["url_hostname"], content


def _asn(value: Any, pointer: str) -> tuple[str, int]:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_ASN:
        raise _invalid(f"asn must be an integer from 0 to {MAX_ASN}", pointer)
    return str(value), value


def _redirect(value: Any, pointer: str) -> tuple[str, dict[str, Any]]:
    value = _members(value, _REDIRECT_MEMBERS, pointer, "redirect must be an object with source_url and target_url")
    source = value.get("source_url")
    if not isinstance(source, str) or not source or len(source) > MAX_URL_LENGTH or not _source_host(source):
        raise _invalid(
            f"source_url must be a hostname and path (at most {MAX_URL_LENGTH} characters)", f"{pointer}/source_url"
        )
    target = value.get("target_url")
    if not isinstance(target, str) or len(target) > MAX_URL_LENGTH or not _absolute_http_url(target):
        raise _invalid(
            f"target_url must be an absolute http or https URL (at most {MAX_URL_LENGTH} characters)",
            f"{pointer}/target_url",
        )
    status = value.get("status_code", 301)
    if status not in REDIRECT_STATUS_CODES or isinstance(status, bool):
        raise _invalid(
            f"status_code must be one of {', '.join(map(str, REDIRECT_STATUS_CODES))}", f"{pointer}/status_code"
        )
    content: dict[str, Any] = {"source_url": source, "target_url": target, "status_code": status}
    for flag in _REDIRECT_FLAGS:
        content[flag] = _flag(value, flag, pointer)
    return source, content


def _source_host(source: str) -> bool:
    """True when ``source`` (a scheme optional) starts with a valid hostname."""
    without_scheme = re.sub(r"^https?://", "", source, flags=re.IGNORECASE)
    host = re.split(r"[/?#]", without_scheme, maxsplit=1)[0]
    return bool(_HOSTNAME.fullmatch(host.lower())) and not host.startswith("*")


def _absolute_http_url(target: str) -> bool:
    try:
        parts = urlsplit(target)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
