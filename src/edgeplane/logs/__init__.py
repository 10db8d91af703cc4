"""Logs: dataset schemas, the filter language, output options and formats, the request journal between the edge and
the log store, the log store, and Logpush delivery (the delivery process and its destinations).

The edge writes its records with ``request_journal`` and ``request_rows``; the delivery process reads them back into
the log store (``journal_intake``) and delivers them. The parsers and compilers here are pure: text or JSON in, a
typed value or a precise error out. Nothing here imports the edge or the API; both use this package.
"""
