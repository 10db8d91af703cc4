"""Logpush: dataset schemas, the filter language, output options and destinations.

The modules here are pure: text or JSON in, a typed value or a precise error out. The API (``edgeplane.api``) and
the delivery process use them; they import nothing from either.
"""
