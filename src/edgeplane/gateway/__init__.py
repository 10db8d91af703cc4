"""The Ethereum JSON-RPC gateway: method policy, limits, upstream pool, response cache, trace_filter; in the
vocabulary of ``edgeplane.jsonrpc``."""
