"""The address policy: every way of writing an address that is not public, refused unless the operator allows its
network; metadata addresses refused always; names judged by what they resolve to, in words that tell nothing of
the internal DNS."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.logs.destinations.address_guard import (
    SPECIAL_NETWORKS,
    AddressPolicy,
    ForbiddenAddress,
    carried_ipv4,
)
from edgeplane.logs.errors import DestinationError

FakeDns = Callable[[str, str], None]

STRICT = AddressPolicy()
LOOPBACK_AND_TEN = AddressPolicy(
    tuple(ipaddress.ip_network(network) for network in ("127.0.0.0/8", "::1/128", "10.0.0.0/8", "169.254.0.0/16"))
)

# (host as written in a conf, what the strict policy calls it: None when it is public)
HOSTS = [
    ("127.0.0.1", "loopback"),
    ("127.0.0.1.", "loopback"),
    ("127.1", "loopback"),
    ("127.0.1", "loopback"),
    ("2130706433", "loopback"),
    ("0x7f.1", "loopback"),
    ("0x7f000001", "loopback"),
    ("0X7F.0.0.1", "loopback"),
    ("0177.0.0.1", "loopback"),
    ("017700000001", "loopback"),
    ("[::1]", "loopback"),
    ("::1", "loopback"),
    ("[0:0:0:0:0:0:0:1]", "loopback"),
    ("[::ffff:127.0.0.1]", "loopback"),
    ("[::ffff:7f00:1]", "loopback"),
    ("[64:ff9b::127.0.0.1]", "loopback"),
    ("[2002:7f00:1::1]", "loopback"),
    ("localhost", "loopback"),
    ("LOCALHOST.", "loopback"),
    ("api.localhost", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("0", "unspecified"),
    ("[::]", "unspecified"),
    ("10.0.0.1", "private"),
    ("012.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("[::ffff:192.168.1.1]", "private"),
    ("[fc00::1]", "private"),
    ("[fd12:3456::1]", "private"),
    ("[fec0::1]", "private"),
    ("100.64.0.1", "shared (CGNAT)"),
    ("100.127.255.254", "shared (CGNAT)"),
    ("169.254.1.1", "link-local"),
    ("[fe80::1]", "link-local"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("[ff02::1]", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("198.18.0.1", "reserved"),
    ("192.0.0.8", "reserved"),
    ("[100::1]", "reserved"),
    ("[2001::1]", "reserved"),
    ("[::127.0.0.1]", "reserved"),
    ("192.0.2.1", "documentation"),
    ("203.0.113.9", "documentation"),
    ("[2001:db8::1]", "documentation"),
    ("169.254.169.254", "cloud metadata"),
    ("2852039166", "cloud metadata"),
    ("0xa9.0xfe.0xa9.0xfe", "cloud metadata"),
    ("169.254.43518", "cloud metadata"),
    ("[::ffff:169.254.169.254]", "cloud metadata"),
    ("[fd00:ec2::254]", "cloud metadata"),
    ("169.254.170.2", "cloud metadata"),
    ("100.100.100.200", "cloud metadata"),
    ("8.8.8.8", None),
    ("1.1.1.1", None),
    ("169.253.1.1", None),
    ("100.63.255.255", None),
    ("100.128.0.0", None),
    ("172.32.0.1", None),
    ("[2606:4700:4700::1111]", None),
    ("[::ffff:8.8.8.8]", None),
    ("[64:ff9b::8.8.8.8]", None),
    ("[2002:808:808::1]", None),
    ("logs.example.com", None),  # a name: judged when resolved
    ("localhost.example.com", None),
]


@pytest.mark.parametrize(("host", "kind"), HOSTS)
def test_the_strict_policy(host: str, kind: str | None) -> None:
    if kind is None:
        STRICT.check_host(host)
        return
    with pytest.raises(DestinationError) as refused:
        STRICT.check_host(host)
    assert f" {kind} address" in str(refused.value)
    assert "logs.destinations.allowed_networks" in str(refused.value)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        *[
            (host, True)
            for host in (
                "127.0.0.1",
                "2130706433",
                "0x7f.1",
                "[::1]",
                "[::ffff:127.0.0.1]",
                "[64:ff9b::127.0.0.1]",
                "[2002:7f00:1::1]",
                "localhost",
                "10.0.0.1",
                "012.0.0.1",
                "[::ffff:10.1.2.3]",
                "169.254.1.1",
                "8.8.8.8",
            )
        ],
        *[
            (host, False)
            for host in (
                "192.168.1.1",
                "172.16.0.1",
                "[fc00::1]",
                "100.64.0.1",
                "[fe80::1]",
                "[::127.0.0.1]",
                "169.254.169.254",
            )
        ],
    ],
)
def test_allowed_networks_open_exactly_what_they_name(host: str, allowed: bool) -> None:
    if allowed:
        LOOPBACK_AND_TEN.check_host(host)
        return
    with pytest.raises(DestinationError):
        LOOPBACK_AND_TEN.check_host(host)


def test_metadata_addresses_stay_refused_inside_an_allowed_network() -> None:
    everything = AddressPolicy((ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")))
    for host in ("169.254.169.254", "[fd00:ec2::254]", "[::ffff:169.254.169.254]", "[64:ff9b::a9fe:a9fe]"):
        with pytest.raises(DestinationError, match="metadata"):
            everything.check_host(host)
    everything.check_host("192.168.0.1")


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.0.0.5", "192.168.3.4", "169.254.169.254", "::1", "fd00::1", "::ffff:10.0.0.1"]
)
def test_a_name_resolving_to_a_refused_address_is_refused(fake_dns: FakeDns, address: str) -> None:
    fake_dns("internal.test", address)
    with pytest.raises(ForbiddenAddress) as refused:
        STRICT.resolve_blocking("internal.test", 443)
    assert address not in str(refused.value)


async def test_names_are_refused_in_the_same_words_whether_they_resolve_or_not(fake_dns: FakeDns) -> None:
    fake_dns("db.internal.test", "10.0.0.5")
    messages = []
    for name in ("db.internal.test", "absent.invalid"):
        with pytest.raises(ForbiddenAddress) as refused:
            await STRICT.resolve(name, 443)
        messages.append(str(refused.value).replace(name, "NAME"))
    assert (
        messages[0]
        == messages[1]
        == "destination host NAME does not resolve to an address this edgeplane may send logs to"
    )


def test_a_name_is_used_when_every_answer_is_allowed(fake_dns: FakeDns) -> None:
    fake_dns("collector.test", "127.0.0.1")
    assert LOOPBACK_AND_TEN.resolve_blocking("collector.test", 443) == [(2, "127.0.0.1")]
    with pytest.raises(ForbiddenAddress):
        STRICT.resolve_blocking("collector.test", 443)


def test_a_loopback_name_is_refused_before_any_lookup() -> None:
    with pytest.raises(DestinationError, match="loopback"):
        STRICT.resolve_blocking("localhost", 443)


def written_forms(address: ipaddress.IPv4Address) -> list[str]:
    """The ways a conf can write ``address`` that a resolver or a connection would take for it."""
    number = int(address)
    a, b, c, d = address.packed
    return [
        str(address),
        f"{address}.",
        str(number),
        hex(number),
        f"0{number:o}",
        f"{a}.{b}.{(c << 8) | d}",
        f"{a}.{(b << 16) | (c << 8) | d}",
        ".".join(hex(part) for part in address.packed),
        ".".join(f"0{part:o}" for part in address.packed),
        f"[::ffff:{address}]",
        f"[::ffff:{(a << 8) | b:x}:{(c << 8) | d:x}]",
        f"[64:ff9b::{address}]",
        f"[2002:{(a << 8) | b:x}:{(c << 8) | d:x}::1]",
    ]


SPECIAL_V4 = [network for network, _ in SPECIAL_NETWORKS if network.version == 4]
SPECIAL_V6 = [network for network, _ in SPECIAL_NETWORKS if network.version == 6]


@settings(max_examples=400)
@given(
    st.one_of(
        st.ip_addresses(v=4),
        st.sampled_from(SPECIAL_V4).flatmap(lambda network: st.ip_addresses(network=network)),
    )
)
def test_every_form_of_an_ipv4_address_is_judged_alike(address: ipaddress.IPv4Address) -> None:
    refusal = STRICT.refusal(address)
    for form in written_forms(address):
        if refusal is None:
            STRICT.check_host(form)
        else:
            with pytest.raises(DestinationError, match=re.escape(f" is {refusal};")):
                STRICT.check_host(form)


@settings(max_examples=200)
@given(
    st.sampled_from(SPECIAL_V6)
    .flatmap(lambda network: st.ip_addresses(network=network))
    .filter(lambda address: carried_ipv4(address) == address)  # those carrying IPv4 are judged as IPv4, above
)
def test_every_special_ipv6_address_is_refused_however_written(address: ipaddress.IPv6Address) -> None:
    for form in (f"[{address}]", f"[{address.exploded}]", f"[{address.exploded.upper()}]"):
        with pytest.raises(DestinationError):
            STRICT.check_host(form)
