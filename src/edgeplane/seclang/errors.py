"""The one exception hierarchy of the SecLang engine.

Every error the package raises on purpose derives from :class:`SecLangError`, so a caller compiling the Core
Ruleset catches one class and maps it once to its own error (a coded JSON-RPC error, a log line at start).
"""


class SecLangError(Exception):
    """Base of every error the SecLang package raises."""


class UnknownTransformation(SecLangError):
    """A rule names a transformation (``t:name``) the engine does not implement."""


class UnsupportedOperator(SecLangError):
    """A rule names an operator (``@name``) the engine does not implement."""


class OperatorArgumentError(SecLangError):
    """An operator's argument cannot be compiled (a bad regex, a missing data file, a bad number or network)."""


class RuleFileError(SecLangError):
    """A SecLang rule file cannot be read or parsed, or a directive in it is malformed."""
