"""How a rule's target selects the keys of a collection (``ARGS:id``, ``ARGS:/^json\\./``,
``!REQUEST_HEADERS:referer``): a literal compared case-insensitively, or a regex searched case-insensitively, each
made once per text and remembering its answers (keys repeat from request to request).

Compiling makes a rule's selectors; running makes them too, for the targets a ``ctl:ruleRemoveTargetById`` names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import re2

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.seclang.errors import RuleFileError
from edgeplane.seclang.rule_files import Target

_UNANCHORED: Final = re2._Anchor.UNANCHORED


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: segment keys hold selectors
class Selector:
    """A key selector of a target: a literal (compared case-insensitively) or a regex (searched, case-insensitive)."""

    literal: bytes | None
    regex: Callable[[bytes], bool] | None  # whether the regex is found in a key (remembered: keys repeat)
    text: str
    # The same for the str keys of TX, IP... (remembered as well), so that those are not encoded to be selected.
    regex_text: Callable[[str], bool] | None = None

    def matches(self, key: bytes) -> bool:
        if self.literal is not None:
            return key.lower() == self.literal
        assert self.regex is not None
        return self.regex(key)


_MEMBERS: Final[dict[bytes, Selector]] = {}


def member_selector(literal: bytes) -> Selector:
    """One selector object per literal key, so that segments reading the same member share its read."""
    selector = _MEMBERS.get(literal)
    if selector is None:
        selector = _MEMBERS[literal] = Selector(literal, None, literal.decode("latin-1"))
    return selector


_NAMED: Final[dict[tuple[str, bool], Selector]] = {}


def named_selector(text: str, *, literal: bool) -> Selector:
    """The selector of a macro's key (``literal``: compared without case) or of an XPath (not compared: the path
    selects), one object per text: rules name the same ones in request after request."""
    selector = _NAMED.get((text, literal))
    if selector is None:
        selector = Selector(text.lower().encode("utf-8") if literal else None, None, text)
        if len(_NAMED) < 4096:  # the texts come from rules; bounded all the same
            _NAMED[(text, literal)] = selector
    return selector


def compile_selector(target: Target, source: str) -> Selector | None:
    if target.selector is None:
        return None
    if target.selector_is_regex:
        regex = _key_regex(target.selector, source)
        regex_text: BoundedMemo[str, bool] = BoundedMemo(
            lambda key: regex(key.encode("latin-1")), max_entries=4096, max_length=256
        )
        return Selector(None, regex, target.selector, regex_text)
    return Selector(target.selector.lower().encode("utf-8"), None, target.selector)


def _key_regex(pattern: str, source: str) -> Callable[[bytes], bool]:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = False  # ModSecurity v3 matches key selectors without case
    options.encoding = re2.Options.Encoding.LATIN1
    try:
        match = re2.compile(pattern.encode("utf-8"), options)._regexp.Match
    except re2.error as error:
        raise RuleFileError(f"{source}: bad key selector /{pattern}/: {error}") from error

    def found(key: bytes) -> bool:
        return bool(match(_UNANCHORED, key, 0, len(key))[0][0] >= 0)

    return BoundedMemo(found, max_entries=4096, max_length=256)


@functools.lru_cache(maxsize=1024)
def target_spec(text: str) -> tuple[str, Selector | None]:
    """A ``ctl`` target (``ARGS``, ``ARGS:foo``, ``ARGS:/^id_/``) as collection and selector; remembered, since an
    exclusion package's ``ctl`` s name the same targets in request after request (and a key regex is compiled)."""
    collection, colon, selector = text.partition(":")
    if not colon or not selector:
        return collection.strip().upper(), None
    target = Target(collection.strip().upper(), selector, False)
    if len(selector) >= 2 and selector.startswith("/") and selector.endswith("/"):
        target = Target(target.collection, selector[1:-1], True)
    try:
        return target.collection, compile_selector(target, "ctl")
    except RuleFileError:
        return target.collection, Selector(selector.lower().encode("utf-8"), None, selector)
