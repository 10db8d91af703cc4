"""Ruleset validation on arbitrary input: whatever JSON a client sends as rules, the answer is the checked rules or
a 400 whose pointer lies inside the request body, never another exception."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.api.errors import ApiError
from edgeplane.api.ruleset_validation import CUSTOM_PHASE, RATELIMIT_PHASE, RuleContext, check_rules
from edgeplane.waf.catalogue import MANAGED_PHASE, MANAGED_RULESET_ID, OWASP_RULESET_ID, OWASP_SCORE_RULE_ID

CUSTOM_ID = "c" * 32
CONTEXTS = [
    RuleContext(phase=CUSTOM_PHASE, kind="zone"),
    RuleContext(phase=CUSTOM_PHASE, kind="root", custom_rulesets={CUSTOM_ID: (CUSTOM_PHASE, frozenset({"d" * 32}))}),
    RuleContext(phase=MANAGED_PHASE, kind="zone"),
    RuleContext(phase=RATELIMIT_PHASE, kind="zone"),
    RuleContext(phase=RATELIMIT_PHASE, kind="root", custom_rulesets={CUSTOM_ID: (RATELIMIT_PHASE, frozenset())}),
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 1200),
    st.sampled_from([10, 60, 3600, 86400]),
    st.sampled_from(
        [
            "",
            "true",
            "current",
            "latest",
            "block",
            "log",
            "skip",
            "execute",
            "waf",
            "paranoia-level-2",
            MANAGED_RULESET_ID,
            OWASP_RULESET_ID,
            OWASP_SCORE_RULE_ID,
            CUSTOM_ID,
            MANAGED_PHASE,
            'http.host eq "a"',
            "cf.colo.id",
            "ip.src",
            "managed_challenge",
        ]
    ),
    st.text(max_size=8),
)
keys = st.sampled_from(
    [
        "id",
        "ref",
        "action",
        "expression",
        "description",
        "enabled",
        "action_parameters",
        "logging",
        "response",
        "status_code",
        "content_type",
        "overrides",
        "categories",
        "category",
        "rules",
        "rulesets",
        "ruleset",
        "phases",
        "products",
        "score_threshold",
        "version",
        "ratelimit",
        "characteristics",
        "period",
        "requests_per_period",
        "mitigation_timeout",
        "score_per_period",
        "counting_expression",
        "other",
    ]
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(rules=st.lists(json_values, max_size=3) | json_values, context=st.sampled_from(CONTEXTS))
def test_any_rules_are_checked_or_refused_with_a_pointer(rules: Any, context: RuleContext) -> None:
    try:
        checked = check_rules(rules, context)
    except ApiError as error:
        refused = error
    else:
        assert len(checked) == len(rules)
        assert all(rule.content["action"] in context.actions for rule in checked)
        return
    assert refused.status == 400
    (entry,) = refused.errors
    assert entry["code"] in (20001, 20002, *range(20010, 20018))
    assert entry["source"]["pointer"].startswith("/rules")
    assert entry["message"]
