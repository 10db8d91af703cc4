"""A zone's previous (package-based) WAF as the database holds it: its settings record (``previous_waf_state``), its
whole configuration as ``edgeplane.waf.previous`` reads it (``load_configuration``), and the rules the edge runs
for it (``previous_waf_rules``). The control plane's previous-WAF and migration routes and the snapshot builder
read it here; ``edgeplane.waf.previous`` turns it into rules and reads no database itself.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.store.previous_waf_models import FirewallRule, PageRule, PreviousWaf, WafOverride
from edgeplane.waf.previous import DEFAULT_ACTION_MODE, ZoneConfiguration, edge_rules


def previous_waf_state(session: Session, zone_id: str, *, for_update: bool = False) -> PreviousWaf:
    """The zone's previous-WAF record. Without one, the defaults: a new, unsaved record that ``for_update`` adds to
    the session so the caller's changes are stored."""
    state = session.get(PreviousWaf, zone_id)
    if state is None:
        state = PreviousWaf(
            zone_id=zone_id,
            setting="off",
            owasp_sensitivity=None,
            owasp_action_mode=DEFAULT_ACTION_MODE,
            group_modes={},
            rule_modes={},
            migration_state="start",
        )
        if for_update:
            session.add(state)
    return state


def load_configuration(session: Session, zone_id: str) -> ZoneConfiguration:
    """The zone's previous-WAF configuration, its firewall rules (by priority), page rules (by priority) and
    URI-based WAF overrides (by priority)."""
    state = previous_waf_state(session, zone_id)
    stored_firewall_rules = session.scalars(
        select(FirewallRule).where(FirewallRule.zone_id == zone_id).order_by(FirewallRule.created_on, FirewallRule.id)
    ).all()
    firewall_rules = sorted(stored_firewall_rules, key=_firewall_rule_order)
    page_rules = session.scalars(
        select(PageRule).where(PageRule.zone_id == zone_id).order_by(PageRule.priority.desc(), PageRule.id)
    ).all()
    overrides = session.scalars(
        select(WafOverride).where(WafOverride.zone_id == zone_id).order_by(WafOverride.priority, WafOverride.id)
    ).all()
    return ZoneConfiguration(
        setting=state.setting,
        migration_state=state.migration_state,
        sensitivity=state.owasp_sensitivity,
        action_mode=state.owasp_action_mode,
        group_modes=dict(state.group_modes or {}),
        rule_modes=dict(state.rule_modes or {}),
        firewall_rules=firewall_rules,
        page_rules=list(page_rules),
        overrides=list(overrides),
    )


def _firewall_rule_order(rule: FirewallRule) -> tuple[bool, int]:
    # Rules with a priority run first, lowest number first; rules without one after them, oldest first.
    return (rule.priority is None, rule.priority or 0)


def previous_waf_rules(session: Session, zone_id: str) -> list[dict[str, Any]] | None:
    """The zone's previous WAF as rules of the ``http_request_firewall_managed`` phase (v4 rule objects: ``skip``
    and ``execute`` rules with overrides), to run after the ruleset-based version; None when the previous version
    does not run (off with no page rule switching it on, or the migration finished)."""
    return edge_rules(load_configuration(session, zone_id))
