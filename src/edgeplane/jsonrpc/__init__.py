"""The Ethereum JSON-RPC vocabulary that the gateway, the development chain and the edge speak alike: the 2.0
envelope (``envelope``), its errors and their codes (``errors``), the parameter types of Ethereum methods
(``quantities``), and parity-style trace records with ``trace_filter``'s parameters (``trace_records``,
``trace_filter_params``). It imports nothing else of edgeplane."""
