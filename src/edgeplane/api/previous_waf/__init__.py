"""The previous managed-rules WAF's APIs (the ``waf`` zone setting; packages, groups and rules; URI-based WAF
overrides) and the firewall rules and page rules the migration to the ruleset-based WAF maps. ``ROUTES`` lists them
all as (path under ``/client/v4``, method, handler)."""

from __future__ import annotations

from edgeplane.api.endpoint import Handler
from edgeplane.api.previous_waf import firewall_rules, overrides, packages, page_rules, settings

ROUTES: list[tuple[str, str, Handler]] = [
    *settings.ROUTES,
    *packages.ROUTES,
    *overrides.ROUTES,
    *firewall_rules.ROUTES,
    *page_rules.ROUTES,
]
