"""The Ethereum JSON-RPC gateway: envelope, method policy, limits, upstream pool, trace_filter."""
