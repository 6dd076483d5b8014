"""The registry of acceleration kinds. The facade, the rewriter and explain look kinds up here
instead of dispatching on types; a new kind is a package implementing
:class:`indexes.kind.IndexKind` plus one line in :data:`KINDS`.

Precedence between kinds (a pure decision, tested without a JVM): a kind that replaces the
relation (a covering index reads only the needed columns and rows) wins over kinds that prune
its file list; among pruning kinds, the verdict keeping the fewest bytes wins.
"""
from __future__ import annotations

from typing import Any

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


def kind_named(name: str) -> IndexKind | None:
    """The kind whose log entries say ``kind: name``, or None for an unknown kind."""
    return _BY_NAME.get(name)


def kind_of(entry: Any) -> IndexKind | None:
    """The kind of an index log entry, or None when no registered kind wrote it."""
    return _BY_NAME.get(entry.kind)


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
