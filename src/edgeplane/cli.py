"""The ``edgeplane`` command line."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from edgeplane import __version__

if TYPE_CHECKING:
    from edgeplane.config import Settings

app = typer.Typer(
    name="edgeplane",
    help="A self-hosted edge for Web3 traffic: Ethereum JSON-RPC gateway, Logpush and a managed WAF.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"edgeplane {__version__}")
        raise typer.Exit


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """edgeplane: a self-hosted edge for Web3 traffic."""


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(f"edgeplane {__version__}")


@app.command()
def serve(
    config: Annotated[
        Path | None,
        typer.Option("--config", help="TOML settings file (default: <data dir>/edgeplane.toml)."),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Where edgeplane keeps its state.")] = None,
    edge_host: Annotated[str | None, typer.Option("--edge-host", help="Address of the edge listener.")] = None,
    edge_port: Annotated[int | None, typer.Option("--edge-port", help="Port of the edge listener.")] = None,
    edge_workers: Annotated[
        int | None, typer.Option("--edge-workers", help="Edge worker processes (default: one per core).")
    ] = None,
    api_host: Annotated[str | None, typer.Option("--api-host", help="Address of the API listener.")] = None,
    api_port: Annotated[int | None, typer.Option("--api-port", help="Port of the API listener.")] = None,
    upstream: Annotated[
        list[str] | None,
        typer.Option(
            "--upstream",
            help="NETWORK=URL of an Ethereum node; repeat for more nodes or networks. Replaces the configured "
            "upstreams of that network.",
        ),
    ] = None,
    log_level: Annotated[str | None, typer.Option("--log-level", help="debug, info, warning or error.")] = None,
    log_format: Annotated[str | None, typer.Option("--log-format", help="json or console.")] = None,
    fresh_chain: Annotated[
        bool, typer.Option("--fresh-chain", help="Discard the stored development chain and start a new one.")
    ] = False,
    role: Annotated[
        str | None,
        typer.Option(
            "--role",
            help="all (default: everything on this machine), edge, api or delivery (one part of a cluster; "
            "docs/scale.md).",
        ),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            help="The configuration database (a cluster's PostgreSQL: postgresql://...); default: SQLite in the "
            "data directory.",
        ),
    ] = None,
    bus: Annotated[
        str | None,
        typer.Option("--bus", help="nats://HOST:PORT[,...] of the JetStream log bus between edge and delivery nodes."),
    ] = None,
    ops_port: Annotated[
        int | None,
        typer.Option("--ops-port", help="Port of the health, readiness and metrics listener of this node."),
    ] = None,
) -> None:
    """Run the edge and API listeners (with embedded defaults when nothing is configured): edge worker, API and
    Logpush delivery processes, supervised by this one."""
    import uvloop

    from edgeplane.config import ConfigError, load_settings
    from edgeplane.structured_logging import configure_logging

    overrides: dict[str, Any] = {
        "data_dir": data_dir,
        "edge_host": edge_host,
        "edge_port": edge_port,
        "edge_workers": edge_workers,
        "api_host": api_host,
        "api_port": api_port,
        "log_level": log_level,
        "log_format": log_format,
        "role": role,
        "database_url": database_url,
        "ops_port": ops_port,
        "bus": {"url": bus} if bus is not None else None,
    }
    try:
        settings = load_settings(config_file=config, overrides=overrides, upstreams=upstream)
        if fresh_chain:
            settings = settings.model_copy(update={"dev_chain": settings.dev_chain.model_copy(update={"fresh": True})})
    except ConfigError as exc:
        typer.echo(f"edgeplane: {exc}", err=True)
        raise typer.Exit(2) from None
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    _share_metrics_between_processes(settings)
    from edgeplane.app import serve as run_service  # after the metrics set-up: it imports prometheus_client

    try:
        uvloop.run(run_service(settings))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        typer.echo(f"edgeplane: {exc}", err=True)
        raise typer.Exit(1) from None


def _share_metrics_between_processes(settings: Any) -> None:
    """Every process of ``edgeplane serve`` (edge workers, API, delivery) writes its metrics to a shared directory,
    which ``/metrics`` on the API process reads (prometheus_client's multiprocess mode); this must happen before
    prometheus_client is imported, and the children inherit it."""
    import os
    import shutil

    directory = settings.data_dir / "run" / "metrics"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)


def _child_settings(settings_file: Path) -> Settings:
    """In a child of ``edgeplane serve``: asks to die with the parent, reads the resolved settings and configures
    logging and the OWASP Core Rule Set's directory from them; returns the settings."""
    from edgeplane.child_process import die_with_parent

    die_with_parent()
    from edgeplane.config import Settings as ResolvedSettings
    from edgeplane.structured_logging import configure_logging
    from edgeplane.waf.catalogue import use_crs_rules_dir

    settings = ResolvedSettings.model_validate_json(settings_file.read_text(encoding="utf-8"))
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    use_crs_rules_dir(settings.waf.crs_rules_dir)
    return settings


_DATABASE_URL_HELP = "The configuration database."


@app.command("edge-worker", hidden=True)
def edge_worker(
    fd: Annotated[int, typer.Option("--fd", help="The inherited edge socket.")],
    settings_file: Annotated[Path, typer.Option("--settings-file", help="The resolved settings, as JSON.")],
    database_url: Annotated[
        str, typer.Option("--database-url", envvar="EDGEPLANE_DATABASE_URL", help=_DATABASE_URL_HELP)
    ],
    worker: Annotated[int, typer.Option("--worker", help="This worker's number (its log partition).")] = 1,
    rate_counters_fd: Annotated[
        int | None, typer.Option("--rate-counters-fd", help="The node's inherited rate counters.")
    ] = None,
) -> None:
    """An edge worker process, started by `edgeplane serve` (not for direct use)."""
    import socket

    settings = _child_settings(settings_file)
    import uvloop

    from edgeplane.edge.runtime import run_edge_worker

    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(
            run_edge_worker(
                settings, socket.socket(fileno=fd), database_url, worker=worker, rate_counters_fd=rate_counters_fd
            )
        )


@app.command("api", hidden=True)
def api(
    fd: Annotated[int, typer.Option("--fd", help="The inherited API socket.")],
    settings_file: Annotated[Path, typer.Option("--settings-file", help="The resolved settings, as JSON.")],
    database_url: Annotated[
        str, typer.Option("--database-url", envvar="EDGEPLANE_DATABASE_URL", help=_DATABASE_URL_HELP)
    ],
    channel_fd: Annotated[
        int | None, typer.Option("--channel-fd", help="The inherited configuration channel's socket.")
    ] = None,
) -> None:
    """The API process, started by `edgeplane serve` (not for direct use)."""
    import socket

    settings = _child_settings(settings_file)
    import uvloop

    from edgeplane.api.process import run_api

    channel = socket.socket(fileno=channel_fd) if channel_fd is not None else None
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(run_api(settings, socket.socket(fileno=fd), database_url, channel=channel))


@app.command("delivery", hidden=True)
def delivery(
    settings_file: Annotated[Path, typer.Option("--settings-file", help="The resolved settings, as JSON.")],
    database_url: Annotated[
        str, typer.Option("--database-url", envvar="EDGEPLANE_DATABASE_URL", help=_DATABASE_URL_HELP)
    ],
    workers: Annotated[int, typer.Option("--workers", help="How many edge workers write log partitions.")],
    intake: Annotated[
        bool,
        typer.Option(
            "--intake/--no-intake", help="Take this machine's request journals (into the log store or to the bus)."
        ),
    ] = True,
    deliver: Annotated[bool, typer.Option("--deliver/--no-deliver", help="Run the Logpush jobs.")] = True,
) -> None:
    """The Logpush delivery process, started by `edgeplane serve` (not for direct use)."""
    settings = _child_settings(settings_file)
    import uvloop

    from edgeplane.logs.delivery_process import run_delivery

    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(run_delivery(settings, database_url, workers=workers, intake=intake, deliver=deliver))


@app.command()
def status(
    config: Annotated[
        Path | None,
        typer.Option("--config", help="TOML settings file (default: <data dir>/edgeplane.toml)."),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="The data directory of this node.")] = None,
    database_url: Annotated[str | None, typer.Option("--database-url", help="The cluster's database.")] = None,
    bus: Annotated[str | None, typer.Option("--bus", help="nats://HOST:PORT[,...] of the log bus.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the state as JSON.")] = False,
) -> None:
    """Show the cluster: its nodes, each Logpush job's lease holder, cursor and lag, and the log bus's streams."""
    import json

    from sqlalchemy.exc import SQLAlchemyError

    from edgeplane.cluster_status import read_cluster_state, render_cluster_state
    from edgeplane.config import ConfigError, load_settings
    from edgeplane.structured_logging import configure_logging

    configure_logging(level="warning", fmt="console")  # on stderr: stdout is the state

    overrides: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": database_url,
        "bus": {"url": bus} if bus is not None else None,
    }
    try:
        settings = load_settings(config_file=config, overrides=overrides)
    except ConfigError as exc:
        typer.echo(f"edgeplane: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        state = read_cluster_state(settings)
    except SQLAlchemyError as exc:
        typer.echo(f"edgeplane: cannot read the cluster's database: {exc.__class__.__name__}: {exc.args[0]}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(state.as_json(), indent=2) if as_json else render_cluster_state(state))


logs_app = typer.Typer(help="The request logs the edge records (the datasets Logpush jobs push).")
app.add_typer(logs_app, name="logs")


@logs_app.command("tail")
def logs_tail(
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="The data directory of `edgeplane serve`.")
    ] = None,
    dataset: Annotated[str, typer.Option("--dataset", help="http_requests or firewall_events.")] = "http_requests",
    filter_text: Annotated[
        str | None,
        typer.Option("--filter", help='A Logpush filter, e.g. \'{"where":{"key":"EdgeResponseStatus",...}}\'.'),
    ] = None,
    from_start: Annotated[bool, typer.Option("--from-start", help="Begin with the records already stored.")] = False,
    count: Annotated[int | None, typer.Option("--count", help="Stop after this many records.")] = None,
    no_follow: Annotated[
        bool, typer.Option("--no-follow", help="Stop at the end instead of waiting for more.")
    ] = False,
) -> None:
    """Print request log records as they arrive, one JSON object a line."""
    import orjson

    from edgeplane.config import default_data_dir
    from edgeplane.logs.errors import LogsError
    from edgeplane.logs.tail import tail_records

    shown = 0
    try:
        for record in tail_records(
            data_dir or default_data_dir(),
            dataset,
            filter_text=filter_text,
            from_start=from_start,
            follow=not no_follow,
        ):
            typer.echo(orjson.dumps(record).decode())
            shown += 1
            if count is not None and shown >= count:
                return
    except LogsError as exc:
        typer.echo(f"edgeplane: {exc}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        return


chain_app = typer.Typer(
    help="The embedded Ethereum development chain (py-evm, Prague), as a local JSON-RPC node.",
    no_args_is_help=False,
)
app.add_typer(chain_app, name="chain")


@chain_app.callback(invoke_without_command=True)
def chain(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8545,
    chain_id: Annotated[int, typer.Option("--chain-id", help="Chain id; not that of a public network.")] = 1337,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where the chain is kept (default: <data dir>/chain).")
    ] = None,
    no_persist: Annotated[bool, typer.Option("--no-persist", help="Keep the chain in memory only.")] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="Discard the stored chain and start a new one.")] = False,
    block_time: Annotated[
        float | None, typer.Option("--block-time", help="Mine every N seconds instead of on every transaction.")
    ] = None,
    accounts: Annotated[int, typer.Option("--accounts", help="Prefunded development accounts.")] = 10,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
    log_format: Annotated[str, typer.Option("--log-format", help="json or console.")] = "console",
    fd: Annotated[int | None, typer.Option("--fd", hidden=True, help="Serve on this inherited socket.")] = None,
    network: Annotated[
        list[str] | None, typer.Option("--network", hidden=True, help="Serve these named chains at /<name>.")
    ] = None,
) -> None:
    """Run the development chain as a JSON-RPC node (the default command of `edgeplane chain`)."""
    if ctx.invoked_subcommand is not None:
        return
    import socket

    if fd is not None:  # started by `edgeplane serve`
        from edgeplane.child_process import die_with_parent

        die_with_parent()
    import uvloop

    from edgeplane.chain.errors import ChainError
    from edgeplane.chain.runner import prepare_data_dir, run_chain_server
    from edgeplane.config import default_data_dir
    from edgeplane.structured_logging import configure_logging

    configure_logging(level=log_level, fmt=log_format)
    if chain_id in _PUBLIC_CHAIN_IDS:
        typer.echo(f"edgeplane: chain id {chain_id} belongs to a public network; choose another", err=True)
        raise typer.Exit(2)
    directory = None if no_persist else (data_dir or default_data_dir() / "chain")
    try:
        prepare_data_dir(directory, fresh=fresh)
        if fd is not None:
            listener = socket.socket(fileno=fd)
        else:
            from edgeplane.listeners import bind_listener

            listener = bind_listener(host, port)
        uvloop.run(
            run_chain_server(
                listener,
                chain_id=chain_id,
                data_dir=directory,
                block_time=block_time,
                networks=frozenset(network) if network else None,
                accounts=accounts,
            )
        )
    except KeyboardInterrupt:
        pass
    except (OSError, ChainError) as exc:
        typer.echo(f"edgeplane: {exc}", err=True)
        raise typer.Exit(1) from None


@chain_app.command("accounts")
def chain_accounts(
    count: Annotated[int, typer.Option("--count", help="How many accounts to list.")] = 10,
) -> None:
    """List the prefunded development accounts and their private keys (public knowledge: never use them for
    real funds)."""
    from edgeplane.chain.dev_accounts import DEV_ACCOUNT_BALANCE_WEI, DEV_MNEMONIC, dev_accounts

    typer.echo(f"Mnemonic: {DEV_MNEMONIC}")
    typer.echo(f"Balance: {DEV_ACCOUNT_BALANCE_WEI // 10**18} ETH each")
    for index, account in enumerate(dev_accounts(count)):
        typer.echo(f"({index}) {account.address} {account.private_key}")


# Chain ids of public networks a development chain must not use (mainnet, testnets and major L2s).
_PUBLIC_CHAIN_IDS = frozenset({1, 5, 10, 56, 100, 137, 8453, 17000, 42161, 11155111, 560048})
