"""Settings layers: defaults, then the TOML file, then EDGEPLANE_* variables, then flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeplane.config import ConfigError, load_settings, redacted_url


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("EDGEPLANE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def test_defaults(tmp_path: Path) -> None:
    settings = load_settings()
    assert settings.data_dir == tmp_path / "xdg" / "edgeplane"
    assert (settings.edge_port, settings.api_port) == (8787, 8788)
    assert set(settings.networks) == {"mainnet", "sepolia", "holesky"}
    assert all(not network.upstreams for network in settings.networks.values())
    assert settings.gateway.max_batch_size == 100


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_file_then_environment_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(
        tmp_path / "edgeplane.toml",
        """
edge_port = 9001
api_port = 9002
log_level = "debug"

[gateway]
max_batch_size = 7

[networks.mainnet]
upstreams = [{ url = "http://127.0.0.1:8545", trace_filter = "debug", max_trace_filter_blocks = 100 }]

[networks.base]
upstreams = [{ url = "https://node.invalid/rpc", name = "base-1" }]
""",
    )
    settings = load_settings(config_file=config)
    assert (settings.edge_port, settings.api_port, settings.log_level) == (9001, 9002, "debug")
    assert settings.gateway.max_batch_size == 7
    assert settings.networks["mainnet"].upstreams[0].trace_filter == "debug"
    assert settings.networks["base"].upstreams[0].label == "base-1"
    assert "sepolia" not in settings.networks  # a file that lists networks lists all of them

    monkeypatch.setenv("EDGEPLANE_EDGE_PORT", "9101")
    monkeypatch.setenv("EDGEPLANE_GATEWAY__MAX_BATCH_SIZE", "8")
    settings = load_settings(config_file=config)
    assert settings.edge_port == 9101
    assert settings.api_port == 9002
    assert settings.gateway.max_batch_size == 8

    settings = load_settings(
        config_file=config,
        overrides={"edge_port": 9201, "api_port": None},
        upstreams=["mainnet=http://127.0.0.1:1", "mainnet=http://127.0.0.1:2", "holesky=http://127.0.0.1:3"],
    )
    assert settings.edge_port == 9201
    assert settings.api_port == 9002
    assert [node.url for node in settings.networks["mainnet"].upstreams] == [
        "http://127.0.0.1:1",
        "http://127.0.0.1:2",
    ]
    assert settings.networks["mainnet"].upstreams[0].trace_filter == "auto"
    assert [node.url for node in settings.networks["holesky"].upstreams] == ["http://127.0.0.1:3"]
    assert "base" in settings.networks


def test_config_file_in_the_data_directory_is_read(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write(data_dir / "edgeplane.toml", "api_port = 9555\n")
    assert load_settings(overrides={"data_dir": data_dir}).api_port == 9555


def test_the_response_cache_is_on_by_default_and_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = load_settings().gateway.cache
    assert (cache.enabled, cache.max_head_age_seconds, cache.write_settle_seconds) == (True, 0.05, 2.0)
    off = write(tmp_path / "off.toml", "[gateway.cache]\nenabled = false\n")
    assert not load_settings(config_file=off).gateway.cache.enabled
    monkeypatch.setenv("EDGEPLANE_GATEWAY__CACHE__MAX_HEAD_AGE_SECONDS", "0")
    assert load_settings().gateway.cache.max_head_age_seconds == 0


def test_config_file_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEPLANE_CONFIG", str(write(tmp_path / "x.toml", "edge_port = 9666\n")))
    assert load_settings().edge_port == 9666


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("edge_port = 'x'\n", "edge_port"),
        ("edge_prot = 1\n", "edge_prot"),
        ("[networks.mainnet]\nupstreams = [{ url = 'ftp://x' }]\n", "http:// or https://"),
        ("[networks.mainnet]\nupstreams = [{ url = 'http://x', trace_filter = 'maybe' }]\n", "trace_filter"),
        ("[gateway]\nmax_batch_size = 0\n", "max_batch_size"),
        ("[gateway.cache]\nmax_head_age_seconds = -1\n", "max_head_age_seconds"),
        ("[gateway.cache]\nttl = 5\n", "ttl"),
        ("this is not toml", "cannot read settings"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(config_file=write(tmp_path / "bad.toml", text))


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(config_file=tmp_path / "nope.toml")


@pytest.mark.parametrize("flag", ["mainnet", "=http://x", "mainnet=", "mainnet=ftp://x"])
def test_bad_upstream_flags(flag: str) -> None:
    with pytest.raises(ConfigError):
        load_settings(upstreams=[flag])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("nats://user:s3cret@bus.example:4222", "nats://***@bus.example:4222"),
        ("tls://t0ken@[::1]:4222", "tls://***@[::1]:4222"),
        ("postgresql://edgeplane:pw@db/edgeplane", "postgresql://***@db/edgeplane"),
        ("postgresql://db/edgeplane?password=hunter2", "postgresql://db/edgeplane"),
        ("nats://host:notaport", "(not a URL)"),
    ],
)
def test_urls_are_shown_without_their_credentials(url: str, shown: str) -> None:
    assert redacted_url(url) == shown


def test_a_bad_bus_url_is_refused_without_echoing_its_credentials() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(overrides={"bus": {"url": "http://user:s3cret@bus.example:4222"}})
    assert "s3cret" not in str(refused.value)
    assert "nats://" in str(refused.value)


@pytest.mark.parametrize("url", ["nats://bus.example", "nats://user:pw@bus.example", "nats://bus.example:4222/x"])
def test_a_bus_url_names_its_port(url: str) -> None:
    # As the bus connection needs it: a URL it would refuse at run time is refused at start.
    with pytest.raises(ConfigError):
        load_settings(overrides={"bus": {"url": url}})
