"""The embedded Ethereum development chain: py-evm at the Prague fork, with call tracing and a trace index."""
