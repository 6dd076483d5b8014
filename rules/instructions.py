"""What the rule engine asks for: :class:`Instruction` values, the names of the indexes it
creates, and the precedence between the user's rules and the engine's own choices.

Precedence: NEVER > a user rule > the engine. A user rule's instruction is always kept; an
engine instruction is dropped when a NEVER rule covers its source, when a user rule already asks
for the same thing, or when it would drop an index the engine did not create. Pure Python.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Iterable

from rules.terms import Priority
from rules.user_rules import RuleSet, UserRule, scheme_less

#: what an instruction does; ``skip`` does nothing: it reports recorded queries the engine left
#: out of its advice (its ``kind`` a reason code of :data:`rules.skipped.CODES`)
ACTIONS = ("create", "refresh", "drop", "cache", "uncache", "skip")
ORIGINS = ("engine", "user")
#: prefix of the names of the indexes the engine creates
ENGINE_PREFIX = "auto_"
#: what an instruction, an index or an action is about: (scheme-less source, kind, columns)
Target = tuple[str, str, tuple[str, ...]]


def target_of(source: str, kind: str, columns: Iterable[str]) -> Target:
    """The :data:`Target` of ``kind`` over ``columns`` of ``source`` (scheme stripped, columns
    sorted), so the same index named two ways compares equal."""
    return scheme_less(source), kind, tuple(sorted(columns))


@dataclass(frozen=True)
class Instruction:
    """One thing to do: ``action`` on a ``kind`` (an index kind, or ``cache``) over ``columns``
    of ``source``, with why (``reason``) and what it is expected to bring."""

    action: str
    kind: str
    source: str
    columns: tuple[str, ...]
    included_columns: tuple[str, ...] = ()
    name: str | None = None
    priority: Priority = Priority.MEDIUM
    ttl_seconds: int | None = None
    origin: str = "engine"
    score: float = 0.0
    estimated_seconds_saved: float = 0.0
    estimated_bytes: int = 0
    queries: int = 0
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}: expected one of {ACTIONS}")
        if self.origin not in ORIGINS:
            raise ValueError(f"unknown origin {self.origin!r}: expected one of {ORIGINS}")

    @property
    def target(self) -> Target:
        """What the instruction is about (see :func:`target_of`)."""
        return target_of(self.source, self.kind, self.columns)


def engine_index_name(kind: str, source: str, columns: Iterable[str]) -> str:
    """The name of an index the engine creates: ``auto_<kind>_<source folder>_<8 hex digits of
    the source path's hash>_<columns>``, with anything but letters, digits and ``_`` replaced
    by ``_`` (so two sources with the same folder name get different names)."""
    path = scheme_less(source)
    folder = path.rstrip("/").rsplit("/", 1)[-1] or "root"
    digest = hashlib.sha256(path.encode("utf-8")).hexdigest()[:8]
    raw = f"{ENGINE_PREFIX}{kind}_{folder}_{digest}_{'_'.join(columns)}"
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", raw)).strip("_")


def from_user_rule(rule: UserRule, source: str) -> Instruction | None:
    """The instruction a user rule gives for a ``source`` it matches (None for a NEVER rule,
    which forbids rather than asks)."""
    if rule.never or rule.kind is None:
        return None
    action = "cache" if rule.kind == "cache" else "create"
    name = None if rule.kind == "cache" else engine_index_name(rule.kind, source, rule.columns)
    return Instruction(action, rule.kind, source, rule.columns, rule.included_columns, name,
                       rule.priority, rule.ttl_seconds, origin="user",
                       reason=f"user rule at {rule.file}:{rule.line}")


def _what(i: Instruction) -> tuple[str, str, tuple[str, ...]]:
    """What a creation or cache instruction makes, whatever else it holds: the source's cache
    (one entry per file, any columns), else an index of its kind keyed on its columns."""
    if i.kind == "cache":
        return scheme_less(i.source), "cache", ()
    return scheme_less(i.source), i.kind, tuple(i.columns)


def merge(user: Iterable[Instruction], engine: Iterable[Instruction], rules: RuleSet,
          engine_indexes: Iterable[str] = ()) -> list[Instruction]:
    """The instructions to carry out: every user instruction, then the engine's that no NEVER
    rule forbids, that no user instruction already covers (the same target; or a user's
    cache of the same source, or index of the same kind on the same key columns, whatever
    columns each holds besides: one cache entry per file, one index, not two), and that drop
    only indexes named in ``engine_indexes`` (those the engine created)."""
    kept = list(user)
    taken = {i.target for i in kept}
    asked = {_what(i) for i in kept if i.action in ("create", "cache")}
    mine = set(engine_indexes)
    for i in engine:
        if rules.never(i.source) is not None or i.target in taken or (
                i.action in ("create", "cache") and _what(i) in asked):
            continue
        if i.action == "drop" and i.name not in mine:
            continue
        kept.append(i)
        taken.add(i.target)
    return kept
