"""Zone plans: the four the v4 API names, with fixed ids."""

from __future__ import annotations

from typing import Any

PLANS: dict[str, dict[str, Any]] = {
    "free": {"id": "0feeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "name": "Free Website", "price": 0},
    "pro": {"id": "94f3b7b768b0458b56d2cac4fe5ec0f9", "name": "Pro Website", "price": 20},
    "business": {"id": "ff1f2bb2ab0a7e0d1c2e8a1d3e2f4a5b", "name": "Business Website", "price": 200},
    "enterprise": {"id": "enterprise0000000000000000000000", "name": "Enterprise Website", "price": 0},
}


def plan_object(legacy_id: str) -> dict[str, Any]:
    """The ``plan`` member of a zone."""
    plan = PLANS[legacy_id]
    return {
        "id": plan["id"],
        "name": plan["name"],
        "price": plan["price"],
        "currency": "USD",
        "frequency": "monthly" if plan["price"] else "",
        "is_subscribed": True,
        "can_subscribe": False,
        "legacy_id": legacy_id,
        "legacy_discount": False,
        "externally_managed": False,
    }


def plan_by_reference(value: Any) -> str | None:
    """The legacy id (free, pro, business, enterprise) a plan reference names: a legacy id, or ``{"id": ...}``."""
    reference = value.get("id") if isinstance(value, dict) else value
    if not isinstance(reference, str):
        return None
    if reference in PLANS:
        return reference
    for legacy_id, plan in PLANS.items():
        if plan["id"] == reference:
            return legacy_id
    return None
