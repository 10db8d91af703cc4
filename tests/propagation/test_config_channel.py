"""The configuration channel's messages, as lines: what each says, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeplane.propagation.channel import (
    Announce,
    Applied,
    ChannelError,
    Hello,
    Message,
    bind_channel,
    connect_channel,
    decode,
    encode,
)


@pytest.mark.parametrize(
    ("message", "line"),
    [
        (Announce(7), b'{"version":7}\n'),
        (Applied(0), b'{"applied":0}\n'),
        (
            Hello(role="edge", pid=42, worker=1, version=3),
            b'{"hello":{"role":"edge","pid":42,"worker":1,"version":3}}\n',
        ),
        (
            Hello(role="delivery", pid=9, worker=None, version=0),
            b'{"hello":{"role":"delivery","pid":9,"worker":null,"version":0}}\n',
        ),
    ],
)
def test_messages_as_lines(message: Message, line: bytes) -> None:
    assert encode(message) == line
    assert decode(line) == message


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"version 7\n", "not JSON"),
        (b"[1]\n", "one member"),
        (b'{"version":7,"applied":7}\n', "one member"),
        (b'{"version":-1}\n', "non-negative"),
        (b'{"version":true}\n', "non-negative"),
        (b'{"applied":"7"}\n', "non-negative"),
        (b'{"commit":7}\n', "unknown channel message"),
        (b'{"hello":{"role":"api","pid":1,"worker":null,"version":0}}\n', "role"),
        (b'{"hello":{"role":"edge","pid":0,"worker":null,"version":0}}\n', "pid"),
        (b'{"hello":{"role":"edge","pid":1,"worker":-1,"version":0}}\n', "worker"),
        (b'{"hello":{"role":"edge","pid":1,"worker":0}}\n', "non-negative"),
    ],
)
def test_what_is_not_a_message(line: bytes, error: str) -> None:
    with pytest.raises(ChannelError, match=error):
        decode(line)


@pytest.mark.parametrize("depth", [1, 12])
def test_a_channel_binds_and_connects_at_any_path_length(tmp_path: Path, depth: int) -> None:
    """A socket address holds 107 bytes; a data directory deeper than that still has its channel."""
    path = tmp_path.joinpath(*(["a-rather-long-directory-name"] * depth)) / "run" / "config.sock"
    listener = bind_channel(path)
    try:
        assert (path.stat().st_mode & 0o777) == 0o600
        client = connect_channel(path)
        accepted, _ = listener.accept()
        client.close()
        accepted.close()
    finally:
        listener.close()
    again = bind_channel(path)  # the socket file left behind is replaced
    again.close()


def test_connecting_where_nothing_listens_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises((FileNotFoundError, ConnectionRefusedError)):
        connect_channel(tmp_path / "run" / "config.sock")
