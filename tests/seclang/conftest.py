"""What the SecLang tests share: the reference they are checked against."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.modsecurity import REFERENCE_VERSION, ModSecurity, ModSecurityUnavailable


@pytest.fixture(scope="session")
def reference_modsecurity() -> Iterator[ModSecurity]:
    """libmodsecurity 3.0.9, freed at the end of the session; the tests that use it skip where it is not installed
    (or is another version), which ``tests/conftest.py`` turns into a failure."""
    try:
        modsecurity = ModSecurity(expected_version=REFERENCE_VERSION)
    except ModSecurityUnavailable as exc:
        pytest.skip(str(exc))
    with modsecurity:
        yield modsecurity
