"""Probation: the rule engine's own actions are kept only if they do not make queries slower.

Every index or cache entry the engine creates becomes an :class:`Action` on probation, with the
query templates it was made for. Once a template ran at least :data:`MIN_RUNS` times after the
action (not counting its first :data:`SETTLE_RUNS` runs after it), :func:`verdict` compares
its median durations before and after: a template more than :data:`MAX_REGRESSION` slower
after the action reverts it (Azure SQL's validate-and-revert), whichever other templates are
still waiting; once every template ran :data:`MIN_RUNS` times on each side and none got
slower, the action is kept. A template that ran fewer times before the action (at least
:data:`MIN_RUNS_BEFORE`) can revert it, saying on how few runs, but never keep it. A reverted
target is not proposed again for a cool-down period (:func:`cooling_down`). Pure Python;
:class:`ActionLog` stores actions as one JSON file each through a file-system object
(``indexes.fs.HadoopFs``'s methods).
"""
from __future__ import annotations

import json
import statistics
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable

from rules.history.records import QueryRecord
from rules.instructions import Target, target_of

#: runs of a template needed on each side of an action before judging it
MIN_RUNS = 5
#: a template with fewer runs than MIN_RUNS before the action (its runs before it are all there
#: will ever be) is judged on this many, for a slowdown only: the star benchmark records 2 runs
#: of each template, then advises
MIN_RUNS_BEFORE = 2
#: runs of a template right after an action that are not judged: the first plan over a new index
#: loads it (0.31 s against 0.02-0.03 s later, a Bloom filter over TPC-H orders) and the JVM is
#: recovering from the build (in the replay, a Bloom filter's lookups took 1.09, 0.59 and 0.68 s
#: right after the round's builds, then 0.21 s, against 0.17-0.34 s before it)
SETTLE_RUNS = 2
#: a template whose median duration grew by more than this share is a regression
MAX_REGRESSION = 0.10
#: how long a reverted target is not proposed again (seconds)
DEFAULT_COOLDOWN_S = 7 * 86400
STATES = ("probation", "kept", "reverted")
ACTIONS_DIR = "_rules/actions"


@dataclass(frozen=True)
class Action:
    """One engine action: ``action`` (create or cache) of ``kind`` on ``columns`` of ``source``
    (``name``: the index), carried out at ``applied_ms`` for the query ``templates``."""

    id: str
    action: str
    kind: str
    source: str
    columns: tuple[str, ...]
    name: str | None
    templates: tuple[str, ...]
    applied_ms: int
    state: str = "probation"
    reason: str = ""
    decided_ms: int | None = None

    @property
    def target(self) -> Target:
        """What the action is about, as instructions name it (:func:`target_of`)."""
        return target_of(self.source, self.kind, self.columns)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Action":
        d = json.loads(text)
        return cls(**{**d, "columns": tuple(d["columns"]), "templates": tuple(d["templates"])})


def new_action(action: str, kind: str, source: str, columns: Iterable[str], name: str | None,
               templates: Iterable[str], applied_ms: int) -> Action:
    """An action on probation, with a fresh id."""
    return Action(uuid.uuid4().hex[:16], action, kind, source, tuple(columns), name,
                  tuple(sorted(set(templates))), int(applied_ms))


def _durations(records: Iterable[QueryRecord], template: str, before_ms: int, settle: int
               ) -> tuple[list[float], list[float]]:
    """The template's timed runs before ``before_ms`` and after it, the first ``settle`` of
    those after left out."""
    before: list[float] = []
    after: list[tuple[int, float]] = []
    for r in records:
        if r.template == template and r.duration_ms is not None:
            if r.timestamp < before_ms:
                before.append(float(r.duration_ms))
            else:
                after.append((r.timestamp, float(r.duration_ms)))
    return before, [d for _, d in sorted(after)[settle:]]


def verdict(action: Action, records: Iterable[QueryRecord], min_runs: int = MIN_RUNS,
            max_regression: float = MAX_REGRESSION, settle_runs: int = SETTLE_RUNS,
            min_runs_before: int = MIN_RUNS_BEFORE) -> tuple[str, str]:
    """``("revert", why)`` when a template with ``min_runs`` timed runs after the action (after
    its first ``settle_runs``) and at least ``min_runs_before`` before it got slower: its
    median duration grew by more than ``max_regression`` (the worst one named); else
    ``("keep", why)`` when every template had ``min_runs`` on each side; else ``("wait",
    why)``. A template with fewer than ``min_runs`` runs before the action (no more can come)
    is judged on the runs there are, for a slowdown only: it can revert the action (the reason
    says on how few runs), never keep it, so the action stays on probation, judged again at
    each review."""
    records = list(records)
    if not action.templates:
        return "keep", "no query template to compare"
    judged: list[tuple[float, str, float, float, int]] = []
    waiting: list[str] = []
    for template in action.templates:
        before, after = _durations(records, template, action.applied_ms, settle_runs)
        if len(before) < min_runs_before or len(after) < min_runs:
            waiting.append(f"template {template}: {len(before)} runs before and {len(after)} "
                           f"after the first {settle_runs}, {min_runs} needed on each side")
            continue
        b, a = statistics.median(before), statistics.median(after)
        judged.append(((a - b) / b if b > 0 else 0.0, template, b, a, len(before)))
        if len(before) < min_runs:
            waiting.append(f"template {template}: {len(before)} runs before the action, "
                           f"{min_runs} needed to keep it (no slowdown over them: median "
                           f"{b:.0f} ms before, {a:.0f} ms after)")
    slower = [j for j in judged if j[0] > max_regression]
    if slower:
        change, template, b, a, n = max(slower)
        few = f" (low confidence: {n} runs before, {min_runs} wanted)" if n < min_runs else ""
        return "revert", (f"template {template}: median {b:.0f} ms before, {a:.0f} ms after "
                          f"({change:+.0%}), more than {max_regression:.0%} slower{few}")
    if waiting:
        return "wait", waiting[0]
    change, template, b, a, _ = max(judged)
    return "keep", (f"template {template}: median {b:.0f} ms before, {a:.0f} ms after "
                    f"({change:+.0%})")


def cooling_down(actions: Iterable[Action], now_ms: int,
                 cooldown_s: float = DEFAULT_COOLDOWN_S) -> set[Target]:
    """Targets of actions reverted less than ``cooldown_s`` ago."""
    return {a.target for a in actions if a.state == "reverted" and a.decided_ms is not None
            and now_ms - a.decided_ms < cooldown_s * 1000}


class ActionLog:
    """The engine's actions of one system path: one JSON file per action under
    ``<system path>/_rules/actions/``, rewritten when its state changes."""

    def __init__(self, fs: Any, system_path: str):
        self._fs = fs
        self.path = f"{str(system_path).rstrip('/')}/{ACTIONS_DIR}"

    def write(self, action: Action) -> None:
        """Stores ``action`` (replacing its previous state)."""
        self._fs.mkdirs(self.path)
        self._fs.write_text(f"{self.path}/{action.id}.json", action.to_json(), overwrite=True)

    def decide(self, action: Action, state: str, reason: str, now_ms: int) -> Action:
        """Stores and returns ``action`` in ``state`` (kept or reverted) for ``reason``."""
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}: expected one of {STATES}")
        decided = replace(action, state=state, reason=reason, decided_ms=int(now_ms))
        self.write(decided)
        return decided

    def read(self) -> list[Action]:
        """Every action, oldest first (unreadable files are skipped)."""
        found = []
        for info in self._fs.list(self.path):
            if info.is_dir or not info.name.endswith(".json"):
                continue
            try:
                found.append(Action.from_json(self._fs.read_text(info.path)))
            except (ValueError, KeyError, TypeError):
                continue
        return sorted(found, key=lambda a: (a.applied_ms, a.id))
