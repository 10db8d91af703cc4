"""A rule's transformation pipeline (``t:urlDecodeUni,t:lowercase``), compiled once and remembered across requests.

CRS applies a few dozen distinct pipelines, each to the same request values in rule after rule (the same headers, the
same path, the same argument names arrive in request after request), so a :class:`Pipeline` is shared by every rule
that lists the same transformations (with or without ``multiMatch``) and answers a value it has seen from a
:class:`~edgeplane.bounded_memo.BoundedMemo`. Transformations are pure functions of bytes, so a remembered result is
the result.

Most values of a JSON-RPC request are *words* (ASCII letters and digits only: hex data, numbers, ``latest``), which
the transformations CRS uses leave alone or only change the case of
(:func:`~edgeplane.seclang.transformations.word_form`). A pipeline made of such transformations answers a word from
that knowledge, without running them or remembering the answer: fresh calldata in every request costs a scan of its
bytes, not a pass of each transformation.
"""

from __future__ import annotations

from typing import Final

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.seclang.transformations import WordForm, transformation, word_form

__all__ = ["Pipeline"]

# Values longer than this are transformed every time (a request body), shorter ones are remembered.
MEMO_MAX_LENGTH: Final = 4096
MEMO_MAX_ENTRIES: Final = 8192


class Pipeline:
    """The transformations ``names`` (as SecLang writes them after ``t:``, ``none`` already applied), called on a
    value: the values the operator runs on, which is the last step's output or, with ``multi_match``, the value and
    every step's output that differs from the one before. Raises ``UnknownTransformation`` for a name that is not
    implemented."""

    __slots__ = ("_memo", "functions", "key", "multi_match", "word_forms")

    def __init__(self, names: tuple[str, ...], *, multi_match: bool = False) -> None:
        self.functions = tuple(transformation(name) for name in names)
        self.multi_match = multi_match
        self.key = tuple(name.lower() for name in names) + (("+multi",) if multi_match else ())
        self._memo: BoundedMemo[bytes, tuple[bytes, ...]] = BoundedMemo(
            self._run, max_entries=MEMO_MAX_ENTRIES, max_length=MEMO_MAX_LENGTH
        )
        # What the pipeline gives for a word, as forms of it; None when it does more than change the case. Two
        # pipelines with the same forms give the same values for every word.
        self.word_forms = _word_forms(names, multi_match=multi_match)

    def __call__(self, value: bytes) -> tuple[bytes, ...]:
        if not self.functions:
            return (value,)
        if self.word_forms is not None and value.isalnum():
            return self.on_word(value)
        return self._memo(value)

    def on_word(self, word: bytes) -> tuple[bytes, ...]:
        """What the pipeline gives for ``word``, which must be a word (``word.isalnum()``) when ``word_forms`` is
        not None."""
        forms = self.word_forms
        assert forms is not None
        if len(forms) == 1:
            return (_word_in(forms[0], word),)
        outputs = [word]
        for form in forms[1:]:
            output = _word_in(form, word)
            if output != outputs[-1]:  # as the steps do: a case change that changes nothing is no new value
                outputs.append(output)
        return tuple(outputs)

    def _run(self, value: bytes) -> tuple[bytes, ...]:
        if not self.multi_match:
            for function in self.functions:
                value = function(value)
            return (value,)
        steps = [value]
        for function in self.functions:
            value = function(value)
            if value != steps[-1]:
                steps.append(value)
        return tuple(steps)

    def __repr__(self) -> str:
        return f"Pipeline({'|'.join(self.key) or 'none'})"


def _word_forms(names: tuple[str, ...], *, multi_match: bool) -> tuple[WordForm, ...] | None:
    """What the pipeline of the transformations ``names`` gives for a word, as forms of the word: one form, or with
    ``multi_match`` the word (``"same"``) then each case change on the way, which ``__call__`` keeps only where it
    changes this word. None when a step does something else than keep or change the case."""
    forms: list[WordForm] = ["same"]
    for name in names:
        form = word_form(name)
        if form is None:
            return None
        if form != "same" and form != forms[-1]:
            forms.append(form)
    return tuple(forms) if multi_match else (forms[-1],)


def _word_in(form: WordForm, word: bytes) -> bytes:
    if form == "lower":
        return word.lower()
    if form == "upper":
        return word.upper()
    return word
