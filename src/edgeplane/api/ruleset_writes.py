"""How a ruleset is written, by the Rulesets API (``edgeplane.api.rulesets``) and by a new zone's creation (the Zones
API, and the bootstrap zone): every write stores the whole ruleset as its next version (``save_ruleset``); a rule keeps
its id and ``version`` while its behaviour is unchanged, and gets the next ``version`` when it changes
(``build_rules``); a new zone starts with its default managed-phase entrypoint (``deploy_default_rulesets``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from edgeplane.api.credentials import new_object_id
from edgeplane.api.ruleset_validation import RuleInput, invalid
from edgeplane.api.timestamps import rfc3339
from edgeplane.store.models import Zone, utc_now
from edgeplane.store.ruleset_models import Ruleset, find_entrypoint, record_version
from edgeplane.waf.catalogue import MANAGED_PHASE, MANAGED_RULESET_ID

DEFAULT_ENTRYPOINT_NAME = "default"
# What makes a rule behave as it does: a change to any of these is a new rule version.
RULE_CONTENT = ("action", "expression", "description", "enabled", "action_parameters", "ratelimit", "logging", "ref")


def rule_json(rule_id: str, ref: str | None, content: Mapping[str, Any], version: int, when: str) -> dict[str, Any]:
    """A rule in the v4 shape, as stored and answered: ``content`` (a checked rule's members) with its id, ``ref``
    (the id when None), ``version`` and ``last_updated`` (``when``, RFC 3339)."""
    document: dict[str, Any] = {
        "id": rule_id,
        "version": str(version),
        "action": content["action"],
        "expression": content["expression"],
        "last_updated": when,
        "ref": ref or rule_id,
        "enabled": content.get("enabled", True),
    }
    # As the product answers: an empty description is left out (rules-as-code clients compare it to an absent one).
    for member in ("description", "action_parameters", "ratelimit", "logging"):
        if content.get(member) not in (None, ""):
            document[member] = content[member]
    return document


def same_behaviour(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two versions of a rule behave alike (``RULE_CONTENT`` equal): if not, the new one is a new version."""
    return all(old.get(member) == new.get(member) for member in RULE_CONTENT)


def build_rules(
    current: list[dict[str, Any]], inputs: list[RuleInput], when: datetime, pointer: str = "/rules"
) -> list[dict[str, Any]]:
    """The ruleset's new rules from the checked ``inputs``: existing rules (by id, else by ref) keep their id, and
    their version unless they changed; a rule id that is not in the ruleset is a 400."""
    by_id = {rule["id"]: rule for rule in current}
    by_ref = {rule.get("ref"): rule for rule in current}
    stamp = rfc3339(when) or ""
    claimed = {rule.id for rule in inputs if rule.id is not None}
    built = []
    for index, rule in enumerate(inputs):
        if rule.id is not None:
            old = by_id.get(rule.id)
            if old is None:
                raise invalid(
                    f"rule id {rule.id} is not a rule of this ruleset; leave id out to add a rule",
                    f"{pointer}/{index}/id",
                )
        else:
            old = by_ref.get(rule.ref) if rule.ref is not None else None
            if old is not None and old["id"] in claimed:
                old = None
            if old is not None:
                claimed.add(old["id"])
        if old is None:
            built.append(rule_json(new_object_id(), rule.ref, rule.content, 1, stamp))
            continue
        candidate = rule_json(old["id"], rule.ref, rule.content, int(old["version"]), old["last_updated"])
        if not same_behaviour(old, candidate):
            candidate = rule_json(old["id"], rule.ref, rule.content, int(old["version"]) + 1, stamp)
        built.append(candidate)
    return built


def save_ruleset(session: Session, ruleset: Ruleset, rules: list[dict[str, Any]], when: datetime, *, new: bool) -> None:
    """Stores ``rules`` as the ruleset's next version (version 1 for a new ruleset)."""
    ruleset.rules = rules
    ruleset.last_updated = when
    ruleset.version = 1 if new else ruleset.version + 1
    if new:
        session.add(ruleset)
    session.flush()
    record_version(session, ruleset)


def default_managed_rules() -> list[dict[str, Any]]:
    """The rules a new zone's ``http_request_firewall_managed`` entrypoint starts with, as a client would send them
    (no ids): execute the Managed Ruleset with its default actions. The OWASP Core Ruleset is deployed by choice
    (``docs/rulesets.md``, "The default deployment")."""
    return [
        {
            "action": "execute",
            "expression": "true",
            "description": "Cloudflare Managed Ruleset",
            "enabled": True,
            "action_parameters": {"id": MANAGED_RULESET_ID, "version": "latest"},
        }
    ]


def deploy_default_rulesets(session: Session, zone: Zone) -> Ruleset | None:
    """Gives ``zone`` its default managed-phase entrypoint (``default_managed_rules``), in the caller's
    transaction. Returns it, or None when the zone already has a managed-phase entrypoint (nothing is changed)."""
    if find_entrypoint(session, zone_id=zone.id, account_id=zone.account_id, phase=MANAGED_PHASE) is not None:
        return None
    when = utc_now()
    entrypoint = Ruleset(
        id=new_object_id(),
        account_id=zone.account_id,
        zone_id=zone.id,
        name=DEFAULT_ENTRYPOINT_NAME,
        description="",
        kind="zone",
        phase=MANAGED_PHASE,
    )
    inputs = [RuleInput(id=None, ref=None, content=rule) for rule in default_managed_rules()]
    save_ruleset(session, entrypoint, build_rules([], inputs, when), when, new=True)
    return entrypoint
