"""The registry of acceleration kinds. The facade, the rewriter, explain and the rule engine's
Spark side look kinds up here instead of dispatching on types; a new kind is a package
implementing :class:`indexes.kind.IndexKind` plus one line in :data:`KINDS` (or a call of
:func:`register`).

The names of a kind (what each one prints stays as it is; log entries on disk keep theirs):

- ``name``: the ``kind`` its log entries record: ``covering``, ``DataSkippingIndex``,
  ``TextIndex``;
- ``display_name``: its ``kind`` in ``indexes()`` and in operation messages:
  ``CoveringIndex``, ``DataSkippingIndex``, ``TextIndex`` (:func:`display_name`);
- ``spec_name``: its ``kind`` in spec files (the command line's ``create``): ``covering``,
  ``skipping``, ``text``;
- ``engine_kinds``: the rule engine's kinds its indexes answer, the ``kind`` of user rules,
  of ``recommend()``'s and ``applyRecommendations()``'s rows, of probation actions and in
  the engine's index names (``rules.user_rules.RULE_KINDS``, which adds ``cache``):
  ``covering``; ``minmax``, ``bloom``, ``valuelist`` (one sketch each); ``text``
  (:func:`kind_for_engine`).

:func:`canonical_kind` takes any of the first three, in any case. Not index kinds: a
data-skipping index's sketch kinds (``MinMax``, ``BloomFilter``, ``ValueList``), the
scheduler's job kinds (``accelerator.scheduler.config.JOB_KINDS``) and the operations events
record.

Precedence between kinds (a pure decision, tested without a JVM): a kind that replaces the
relation (a covering index reads only the needed columns and rows) wins over kinds that prune
its file list; among pruning kinds, the verdict keeping the fewest bytes wins.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from indexes.covering.kind import CoveringKind
from indexes.errors import InvalidIndexConfigError
from indexes.kind import IndexKind, Serving
from indexes.skipping.kind import SkippingKind
from indexes.text.kind import TextKind

KINDS: tuple[IndexKind, ...] = (
    CoveringKind(),
    SkippingKind(),
    TextKind(),
)

_BY_NAME = {k.name: k for k in KINDS}
_SERVING_ORDER = {Serving.REPLACE: 0, Serving.PRUNE: 1}


def register(kind: IndexKind) -> None:
    """Adds ``kind`` to the registry, after the kinds registered before it (it is then
    created, served, explained, listed and advised like the built-in kinds); ValueError when
    one of its names (log, display, spec or rule-engine kind) is a registered kind's."""
    global KINDS

    def names(k: IndexKind) -> list[str]:
        return [n.lower() for n in (k.name, k.display_name, k.spec_name, *k.engine_kinds)]

    taken = {n for k in KINDS for n in names(k)}
    clash = [n for n in names(kind) if n in taken]
    if clash:
        raise ValueError(f"an index kind named '{clash[0]}' is registered already")
    KINDS = (*KINDS, kind)
    _BY_NAME[kind.name] = kind


@contextmanager
def registered(kind: IndexKind) -> Iterator[IndexKind]:
    """``kind`` registered (:func:`register`) while the block runs, removed after it."""
    global KINDS
    register(kind)
    try:
        yield kind
    finally:
        KINDS = tuple(k for k in KINDS if k is not kind)
        del _BY_NAME[kind.name]


def canonical_kind(name: str) -> IndexKind | None:
    """The kind ``name`` names, as its log entries, ``indexes()`` or spec files spell it, in any
    case (``covering``, ``CoveringIndex``, ``DataSkippingIndex``, ``skipping``...), or None."""
    wanted = str(name).lower()
    return next((k for k in KINDS
                 if wanted in (k.name.lower(), k.display_name.lower(), k.spec_name.lower())),
                None)


def kind_of(entry: Any) -> IndexKind | None:
    """The kind of an index log entry, or None when no registered kind wrote it."""
    return _BY_NAME.get(entry.kind)


def display_name(entry: Any) -> str:
    """How ``indexes()`` and messages name the kind of an index log entry: its kind's display
    name, or the entry's own ``kind`` when no registered kind wrote it."""
    kind = kind_of(entry)
    return kind.display_name if kind is not None else entry.kind


def kind_for_engine(engine_kind: str) -> IndexKind | None:
    """The kind whose indexes answer the rule engine's ``engine_kind`` (minmax, covering...),
    or None when no registered kind does (the cache, or an unknown kind)."""
    return next((k for k in KINDS if engine_kind in k.engine_kinds), None)


def optimize_modes() -> tuple[str, ...]:
    """The modes optimizeIndex accepts: those of every kind that compacts its data, in
    registry order."""
    return tuple(dict.fromkeys(m for k in KINDS for m in k.optimize_modes))


def kind_for_config(config: Any) -> IndexKind:
    """The kind whose config type ``config`` is; InvalidIndexConfigError otherwise."""
    for kind in KINDS:
        if isinstance(config, kind.config_type):
            return kind
    names = " or ".join(k.config_type.__name__ for k in KINDS).replace(
        "CoveringIndexConfig", "IndexConfig (CoveringIndexConfig)", 1)
    raise InvalidIndexConfigError(
        f"createIndex expects an {names}, got {type(config).__name__}")


def choose(verdicts: list[Any]) -> Any:
    """The verdict that serves a relation among every index's ``verdicts`` for it, or None:
    each kind picks its best applicable verdict, then replacing beats pruning, and among
    pruning kinds the fewest kept bytes win."""
    best = []
    for kind in KINDS:
        own = [v for v in verdicts if v.applicable and v.index.kind == kind.name]
        chosen = kind.choose(own) if own else None
        if chosen is not None:
            best.append((_SERVING_ORDER[kind.serving], chosen.cost, len(best), chosen))
    return min(best)[-1] if best else None
