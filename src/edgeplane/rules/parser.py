"""The parser: tokens to a syntax tree, by recursive descent with the wirefilter precedence
``not`` > ``and`` > ``xor`` > ``or`` (all left-associative; ``a or b and c`` is ``a or (b and c)``).

Nesting (parentheses, ``not``, function calls) is bounded by ``MAX_NESTING`` so that no expression reaches Python's
recursion limit, and the text by ``MAX_EXPRESSION_LENGTH`` characters, the Cloudflare limit.
"""

from __future__ import annotations

from collections.abc import Callable

from edgeplane.rules.errors import RulesError
from edgeplane.rules.lexer import Kind, Token, tokenize
from edgeplane.rules.tree import (
    BoolLiteral,
    Call,
    Compare,
    FieldRef,
    Index,
    ListReference,
    Literal,
    LiteralSet,
    Logical,
    Node,
    Not,
    Range,
    Value,
)

MAX_EXPRESSION_LENGTH = 4096
MAX_NESTING = 64

COMPARISON_OPERATORS = {
    "eq": "eq", "==": "eq", "ne": "ne", "!=": "ne", "lt": "lt", "<": "lt", "le": "le", "<=": "le", "gt": "gt",
    ">": "gt", "ge": "ge", ">=": "ge", "contains": "contains", "matches": "matches", "~": "matches",
    "wildcard": "wildcard", "in": "in", "&": "bitwise_and",
}  # fmt: skip
_LOGICAL = {"or": "or", "||": "or", "xor": "xor", "^^": "xor", "and": "and", "&&": "and"}
_KEYWORDS = frozenset({"and", "or", "xor", "not", "strict", *COMPARISON_OPERATORS})


def parse(text: str) -> Node:
    """The syntax tree of ``text``. Raises ``RulesError`` for text over ``MAX_EXPRESSION_LENGTH`` characters, an
    empty expression, nesting deeper than ``MAX_NESTING``, any syntax error, or input left after the expression."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise RulesError(f"expression is longer than {MAX_EXPRESSION_LENGTH} characters", MAX_EXPRESSION_LENGTH)
    parser = _Parser(tokenize(text))
    if parser.peek.kind is Kind.END:
        raise RulesError("empty expression", parser.peek.position)
    node = parser.expression()
    trailing = parser.peek
    if trailing.kind is not Kind.END:
        raise RulesError(f"unexpected {_describe(trailing)} after the expression", trailing.position)
    return node


def _describe(token: Token) -> str:
    return token.kind.value if token.kind is Kind.END else f"{token.text!r}"


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    @property
    def peek(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind is not Kind.END:
            self.index += 1
        return token

    def at(self, *texts: str) -> bool:
        token = self.peek
        return token.kind in (Kind.PUNCT, Kind.NAME) and token.text in texts

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise RulesError(f"expected {text!r}, found {_describe(self.peek)}", self.peek.position)
        return self.advance()

    def enter(self, position: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise RulesError(f"expression is nested deeper than {MAX_NESTING} levels", position)

    # Logical operators, loosest first.

    def expression(self) -> Node:
        return self._chain("or", self._xor)

    def _xor(self) -> Node:
        return self._chain("xor", self._and)

    def _and(self) -> Node:
        return self._chain("and", self._unary)

    def _chain(self, operator: str, parse_operand: Callable[[], Node]) -> Node:
        first: Node = parse_operand()
        operands = [first]
        while self.peek.kind in (Kind.NAME, Kind.PUNCT) and _LOGICAL.get(self.peek.text) == operator:
            self.advance()
            operands.append(parse_operand())
        if len(operands) == 1:
            return first
        return Logical(operator, tuple(operands), _position(first))

    def _unary(self) -> Node:
        if self.at("not", "!"):
            token = self.advance()
            self.enter(token.position)
            operand = self._unary()
            self.depth -= 1
            return Not(operand, token.position)
        return self._primary()

    def _primary(self) -> Node:
        token = self.peek
        if self.at("("):
            self.advance()
            self.enter(token.position)
            node = self.expression()
            self.expect(")")
            self.depth -= 1
            return node
        if token.kind is Kind.NAME and token.text in ("true", "false") and not self._next_is("("):
            self.advance()
            return BoolLiteral(token.text == "true", token.position)
        if token.kind in (Kind.STRING, Kind.INT, Kind.IP):
            self.advance()
            return _literal(token)
        left = self.value()
        operator_token = self.peek
        operator = self._comparison_operator()
        if operator is None:
            return left
        right = self._right(operator)
        return Compare(left, operator, right, _position(left), operator_token.position)

    def _next_is(self, text: str) -> bool:
        following = self.tokens[self.index + 1] if self.index + 1 < len(self.tokens) else self.peek
        return following.kind is Kind.PUNCT and following.text == text

    def _comparison_operator(self) -> str | None:
        token = self.peek
        if token.kind is Kind.NAME and token.text == "strict":
            self.advance()
            if not self.at("wildcard") or self.peek.position != token.position + len("strict "):
                raise RulesError("expected 'strict wildcard' (one space)", token.position)
            self.advance()
            return "strict wildcard"
        if token.kind in (Kind.NAME, Kind.PUNCT) and token.text in COMPARISON_OPERATORS:
            self.advance()
            return COMPARISON_OPERATORS[token.text]
        return None

    def value(self) -> Value:
        """A field, a function call, either followed by indexes."""
        token = self.peek
        if token.kind is not Kind.NAME or token.text in _KEYWORDS:
            raise RulesError(f"expected a field or a function, found {_describe(token)}", token.position)
        self.advance()
        node: Value = self._call(token) if self.at("(") else FieldRef(token.text, token.position)
        while self.at("["):
            bracket = self.advance()
            key_token = self.advance()
            key: int | str | None
            if key_token.kind is Kind.PUNCT and key_token.text == "*":
                key = None
            elif key_token.kind is Kind.STRING:
                key = str(key_token.value)
            elif key_token.kind is Kind.INT and isinstance(key_token.value, int) and key_token.value >= 0:
                key = key_token.value
            else:
                raise RulesError("expected a non-negative integer, a string or '*' as index", key_token.position)
            self.expect("]")
            node = Index(node, key, bracket.position)
        return node

    def _call(self, name: Token) -> Call:
        self.enter(name.position)
        self.expect("(")
        args: list[Node] = []
        if not self.at(")"):
            args.append(self.expression())
            while self.at(","):
                self.advance()
                args.append(self.expression())
        self.expect(")")
        self.depth -= 1
        return Call(name.text, tuple(args), name.position)

    def _right(self, operator: str) -> Literal | LiteralSet | ListReference | Value:
        token = self.peek
        if operator == "in" and self.at("{"):
            return self._set()
        if token.kind in (Kind.STRING, Kind.INT, Kind.IP):
            self.advance()
            return _literal(token)
        if token.kind is Kind.LIST:
            self.advance()
            return ListReference(token.text, token.position)
        if token.kind is Kind.NAME and token.text not in _KEYWORDS:
            return self.value()
        raise RulesError(f"expected a value after {operator!r}, found {_describe(token)}", token.position)

    def _set(self) -> LiteralSet:
        opening = self.expect("{")
        items: list[Literal | Range] = []
        while not self.at("}"):
            token = self.advance()
            if token.kind not in (Kind.STRING, Kind.INT, Kind.IP):
                raise RulesError(f"expected a literal or '}}' in the set, found {_describe(token)}", token.position)
            low = _literal(token)
            if self.at(".."):
                self.advance()
                high_token = self.advance()
                if high_token.kind is not token.kind:
                    raise RulesError(f"expected a range end of the same kind as {token.text!r}", high_token.position)
                items.append(Range(low, _literal(high_token), token.position))
            else:
                items.append(low)
        self.expect("}")
        return LiteralSet(tuple(items), opening.position)


def _literal(token: Token) -> Literal:
    value = token.value if token.value is not None else token.text
    return Literal(token.kind.value, value, token.position, token.text)


def _position(node: Node) -> int:
    """Where the text of ``node`` starts (an index's own position is its bracket)."""
    while isinstance(node, Index):
        node = node.target
    return node.position
