"""The ``edgeplane`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from edgeplane import __version__

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
) -> None:
    """Run the edge and API listeners (with embedded defaults when nothing is configured)."""
    import uvloop

    from edgeplane.app import serve as run_service
    from edgeplane.config import ConfigError, load_settings
    from edgeplane.structured_logging import configure_logging

    overrides: dict[str, Any] = {
        "data_dir": data_dir,
        "edge_host": edge_host,
        "edge_port": edge_port,
        "api_host": api_host,
        "api_port": api_port,
        "log_level": log_level,
        "log_format": log_format,
    }
    try:
        settings = load_settings(config_file=config, overrides=overrides, upstreams=upstream)
    except ConfigError as exc:
        typer.echo(f"edgeplane: {exc}", err=True)
        raise typer.Exit(2) from None
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    try:
        uvloop.run(run_service(settings))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        typer.echo(f"edgeplane: {exc}", err=True)
        raise typer.Exit(1) from None
