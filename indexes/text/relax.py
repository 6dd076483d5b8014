"""A full-text query relaxed to a requirement over literals (:mod:`indexes.text.literals`)
that every row matching it meets: the candidates of ``Hyperspace.search`` in a shard of groups
of rows, which holds trigrams only.

A row matching the query holds every word of a phrase it matches and at least one of the parts
of the query that are not excluded, and it holds each such word as a substring, in some case,
so the requirement contains each word (a prefix: its text), turns each phrase into "all its
words", drops exclusions (``-x``, ``NOT x``), and joins parts with AND only where the query
joins them all with an explicit AND (OR elsewhere). Anything else (fields, ranges, boosts,
slop, escapes, words with non-ASCII characters, whose lower case tantivy and Python may see
differently) requires nothing: the requirement is then weaker, never wrong. Pure Python: words
come from the caller's tokenizer (the index's own, so they are the words the index would see).
"""
from __future__ import annotations

import re
from typing import Callable

from indexes.text import literals as L

Tokenize = Callable[[str], list[str]]

_LEXEME = re.compile(r'\s+|\(|\)|"[^"]*"|[+-](?=[("])|[^\s()"]+')
_SPECIAL = set(':^~[]{}\\/!&|<>=*"')


class _Unknown(Exception):
    """The query holds syntax the relaxation does not read."""


def relax(query: str, tokenize: Tokenize) -> L.Requirement:
    """A requirement every row matching the full-text ``query`` meets."""
    found = _LEXEME.findall(query)
    if "".join(found) != query:   # an unbalanced quote
        return L.ANYTHING
    lexemes = [x for x in found if not x.isspace()]
    try:
        relaxed, end = _expression(lexemes, 0, tokenize)
    except _Unknown:
        return L.ANYTHING
    return relaxed if end == len(lexemes) else L.ANYTHING


def _expression(lexemes: list[str], i: int, tokenize: Tokenize) -> tuple[L.Requirement, int]:
    """The clauses from ``i`` up to a closing bracket or the end, relaxed."""
    kept: list[L.Requirement] = []
    joins: list[str] = []
    pending: str | None = None
    clauses = 0
    while i < len(lexemes) and lexemes[i] != ")":
        if lexemes[i] in ("AND", "OR"):
            if pending is not None or not clauses:
                raise _Unknown
            pending, i = lexemes[i], i + 1
            continue
        if clauses:
            joins.append(pending or "")
        pending = None
        part, excluded, i = _clause(lexemes, i, tokenize)
        clauses += 1
        if not excluded:
            kept.append(part)
    if pending is not None or not kept:
        raise _Unknown
    if joins and all(j == "AND" for j in joins):
        return L.all_of(kept), i
    return L.any_of(kept), i


def _clause(lexemes: list[str], i: int, tokenize: Tokenize) -> tuple[L.Requirement, bool, int]:
    """One clause at ``i``: (its requirement, whether it is excluded, the next position)."""
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
        known = base.isascii() and tokenize(base) == [base.lower()]
        return L.contains(base.lower()) if known else L.ANYTHING, excluded, i + 1
    if _SPECIAL.intersection(lexeme):
        raise _Unknown
    return _words(lexeme, tokenize), excluded, i + 1


def _words(text: str, tokenize: Tokenize) -> L.Requirement:
    """Every word of ``text`` (as the tokenizer sees it) is a substring."""
    if "\\" in text:
        raise _Unknown
    return L.all_of([L.contains(w) for w in tokenize(text) if w.isascii()])
