"""edgeplane: a self-hosted edge for Web3 traffic."""

__version__ = "0.1.0"
