"""Properties of the permission decision, over any policies (hypothesis), in memory: the order of policies does not
matter, a deny never adds and an allow never removes, writing includes reading, "every zone of an account" means each
of them, and a token created by a caller (as ``POST /user/tokens`` checks it) never allows anything its creator does
not."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.api.auth import Principal
from edgeplane.api.permissions import (
    Access,
    Permission,
    Policy,
    Resource,
    Target,
    decide,
    permission_catalogue,
    ungranted,
)

USER, ACCOUNT, OTHER_ACCOUNT = "u" * 32, "a" * 32, "b" * 32
ZONES = ("1" * 32, "2" * 32, "3" * 32)  # all of ACCOUNT

GROUPS = permission_catalogue().groups
PERMISSIONS = [Permission(family, access) for family in sorted(permission_catalogue().families) for access in Access]
TARGETS = [
    Target.user(USER),
    Target.account(ACCOUNT),
    Target.zones_of(ACCOUNT),
    *(Target.zone(ACCOUNT, zone) for zone in ZONES),
]

resources = st.one_of(
    st.just(Resource("user", USER)),
    st.sampled_from([Resource("account", ACCOUNT), Resource("account", "*"), Resource("account", OTHER_ACCOUNT)]),
    st.sampled_from([Resource("zone", zone) for zone in (*ZONES, "*")]),
    st.sampled_from([Resource("zone", zone, ACCOUNT) for zone in (*ZONES, "*")]),
)
policies = st.builds(
    Policy,
    allow=st.booleans(),
    resources=st.lists(resources, min_size=1, max_size=3).map(tuple),
    groups=st.lists(st.sampled_from(GROUPS), max_size=4).map(tuple),
)
policy_sets = st.lists(policies, max_size=5).map(tuple)


def token(held: tuple[Policy, ...]) -> Principal:
    return Principal(user_id=USER, email="x@example.com", account_id=ACCOUNT, token_id="t" * 32, policies=held)


@given(policy_sets, st.randoms())
def test_the_order_of_policies_does_not_matter(held: tuple[Policy, ...], random: object) -> None:
    shuffled = list(held)
    random.shuffle(shuffled)  # type: ignore[attr-defined]
    for permission in PERMISSIONS:
        for target in TARGETS:
            assert decide(held, permission, target) == decide(tuple(shuffled), permission, target)


@given(policy_sets, policies)
def test_a_deny_never_adds_and_an_allow_never_removes(held: tuple[Policy, ...], extra: Policy) -> None:
    for permission in PERMISSIONS:
        for target in TARGETS:
            before = decide(held, permission, target)
            after = decide((*held, extra), permission, target)
            if extra.allow:
                assert after or not before
            else:
                assert before or not after


@given(policy_sets)
def test_writing_includes_reading_and_every_zone_means_each(held: tuple[Policy, ...]) -> None:
    for family in permission_catalogue().families:
        read, write = Permission(family, Access.READ), Permission(family, Access.WRITE)
        for target in TARGETS:
            if decide(held, write, target):
                assert decide(held, read, target)
        for permission in (read, write):
            if decide(held, permission, Target.zones_of(ACCOUNT)):
                assert all(decide(held, permission, Target.zone(ACCOUNT, zone)) for zone in ZONES)


@settings(max_examples=300)
@given(policy_sets, policy_sets)
def test_a_created_token_never_allows_more_than_its_creator(
    creator_policies: tuple[Policy, ...], created: tuple[Policy, ...]
) -> None:
    creator = token(creator_policies)
    zone_accounts = {zone: ACCOUNT for zone in ZONES}
    valid = tuple(
        Policy(p.allow, tuple(r for r in p.resources if r.id != OTHER_ACCOUNT), p.groups)  # refused at creation
        for p in created
    )
    if any(ungranted(policy, creator.allows, ACCOUNT, zone_accounts) for policy in valid):
        return  # refused with 403
    new = token(valid)
    for permission in PERMISSIONS:
        for target in TARGETS:
            if new.allows(permission, target):
                assert creator.allows(permission, target), (permission, target)
