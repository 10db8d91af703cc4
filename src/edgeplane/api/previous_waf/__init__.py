"""The previous managed-rules WAF's APIs (the ``waf`` zone setting; packages, groups and rules; URI-based WAF
overrides) and the firewall rules and page rules the migration to the ruleset-based WAF maps. ``ROUTES`` lists them
all, each with the permission it needs (``ApiRoute``)."""

from __future__ import annotations

from edgeplane.api.endpoint import ApiRoute
from edgeplane.api.previous_waf import filters, firewall_rules, overrides, packages, page_rules, settings

ROUTES: list[ApiRoute] = [
    *settings.ROUTES,
    *packages.ROUTES,
    *overrides.ROUTES,
    *filters.ROUTES,
    *firewall_rules.ROUTES,
    *page_rules.ROUTES,
]
