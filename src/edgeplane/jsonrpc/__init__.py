"""The Ethereum JSON-RPC vocabulary that the gateway, the development chain and the edge speak alike: the 2.0
envelope (``envelope``), its errors and their codes (``errors``), the parameter types of Ethereum methods
(``quantities``), and parity-style trace records with ``trace_filter``'s parameters (``trace_records``,
``trace_filter_params``). Of the rest of edgeplane it imports only a request body's one JSON reading
(``edgeplane.body_document``), which the envelope checks."""
