"""A full-text query relaxed to what a document of several rows must hold when one of its rows
matches it: the candidates of ``Hyperspace.search`` in a grouped shard (one document per group
of rows, words without positions).

A row matching the query holds every word of a phrase it matches and at least one of the parts
of the query that are not excluded, so the relaxed query keeps the words, turns each phrase into
"all its words", drops exclusions (``-x``, ``NOT x``), and joins parts with AND only where the
query joins them all with an explicit AND (OR elsewhere). Anything else (fields, ranges, boosts,
slop, escapes, a term that yields no word) is "unknown": the relaxation then keeps every
document, which is always sound. Pure Python: words come from the caller's tokenizer (the
index's own, so they are the words the index holds).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Union

Tokenize = Callable[[str], list[str]]


@dataclass(frozen=True)
class Words:
    """A document holding every one of ``words``."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class Prefix:
    """A document holding a word that starts with ``text``."""

    text: str


@dataclass(frozen=True)
class Combined:
    """Every part (``all``) or at least one part."""

    all: bool
    parts: tuple["Relaxed", ...]


Relaxed = Union[Words, Prefix, Combined]

_LEXEME = re.compile(r'\s+|\(|\)|"[^"]*"|[+-](?=[("])|[^\s()"]+')
_SPECIAL = set(':^~[]{}\\/!&|<>=*"')


class _Unknown(Exception):
    """The query holds syntax the relaxation does not read."""


def relax(query: str, tokenize: Tokenize) -> Relaxed | None:
    """What a document holds when one of its rows matches ``query``, or None when unknown
    (every document may hold a matching row)."""
    found = _LEXEME.findall(query)
    if "".join(found) != query:   # an unbalanced quote
        return None
    lexemes = [x for x in found if not x.isspace()]
    try:
        relaxed, end = _expression(lexemes, 0, tokenize)
    except _Unknown:
        return None
    return relaxed if end == len(lexemes) else None


def _expression(lexemes: list[str], i: int, tokenize: Tokenize) -> tuple[Relaxed | None, int]:
    """The clauses from ``i`` up to a closing bracket or the end, relaxed."""
    parts: list[Relaxed | None] = []
    joins: list[str] = []
    pending: str | None = None
    while i < len(lexemes) and lexemes[i] != ")":
        if lexemes[i] in ("AND", "OR"):
            if pending is not None or not parts:
                raise _Unknown
            pending, i = lexemes[i], i + 1
            continue
        if parts:
            joins.append(pending or "")
        pending = None
        part, excluded, i = _clause(lexemes, i, tokenize)
        parts.append(_EXCLUDED if excluded else part)
    if pending is not None:
        raise _Unknown
    kept = [p for p in parts if p is not _EXCLUDED]
    if not kept:
        raise _Unknown
    if parts and joins and all(j == "AND" for j in joins):
        known = tuple(p for p in kept if p is not None)
        if not known:
            return None, i
        return (known[0] if len(known) == 1 else Combined(True, known)), i
    if any(p is None for p in kept):
        return None, i
    return (kept[0] if len(kept) == 1 else Combined(False, tuple(kept))), i


_EXCLUDED = Words(())   # a marker: an excluded clause, which the relaxation drops


def _clause(lexemes: list[str], i: int,
            tokenize: Tokenize) -> tuple[Relaxed | None, bool, int]:
    """One clause at ``i``: (its relaxation, whether it is excluded, the next position)."""
    lexeme, excluded = lexemes[i], False
    if lexeme in ("+", "-", "NOT"):
        excluded, i = lexeme != "+", i + 1
        if i >= len(lexemes):
            raise _Unknown
        lexeme = lexemes[i]
    elif lexeme[0] in "+-" and len(lexeme) > 1:
        excluded, lexeme = lexeme[0] == "-", lexeme[1:]
    if lexeme == "(":
        inner, end = _expression(lexemes, i + 1, tokenize)
        if end >= len(lexemes):
            raise _Unknown
        return inner, excluded, end + 1
    if lexeme.startswith('"'):
        return _words(lexeme[1:-1], tokenize), excluded, i + 1
    if lexeme in ("AND", "OR", "NOT", ")") or lexeme[0] in "+-":
        raise _Unknown
    if lexeme.endswith("*") and not _SPECIAL.intersection(lexeme[:-1]):
        base = lexeme[:-1]
        return (Prefix(base.lower()) if base and tokenize(base) == [base.lower()] else None,
                excluded, i + 1)
    if _SPECIAL.intersection(lexeme):
        raise _Unknown
    return _words(lexeme, tokenize), excluded, i + 1


def _words(text: str, tokenize: Tokenize) -> Words | None:
    if "\\" in text:
        raise _Unknown
    words = tuple(tokenize(text))
    return Words(words) if words else None
