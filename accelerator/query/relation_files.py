"""The files of a plan's relation, for index matching and cache serving: those an index
recorded of the same source version, else described by the JVM, kept per fingerprint."""
from __future__ import annotations

import json
import threading
from typing import Any

from cachetools import FIFOCache

from indexes.description import SourceDescription, SourceFile

#: file lists of sources no index recorded, kept per fingerprint (oldest dropped first)
FILE_LISTS_CACHED = 16


class RelationFiles:
    """Lists the files of relations through the JVM (``plans``: the PlanRewrite helper)."""

    def __init__(self, plans: Any):
        self._plans = plans
        self._lock = threading.Lock()
        self._lists: FIFOCache = FIFOCache(FILE_LISTS_CACHED)

    def describe(self, plan: Any, ordinal: int, level: int) -> SourceDescription:
        """The JVM's description of the plan's relation ``ordinal`` (pre-order), with its
        fingerprint at ``level`` 1 and its files too at level 2."""
        return SourceDescription.from_json(json.loads(self._plans.describe(plan, ordinal, level)))

    def files(self, plan: Any, decision: Any, entries: list[Any]
              ) -> tuple[SourceFile, ...] | None:
        """The files of the relation of ``decision`` (a
        :class:`accelerator.query.relation_choice.RelationDecision`): those an index of ``entries``
        recorded when the fingerprints match (no JVM call), else described by the JVM, cached
        per fingerprint."""
        fingerprint = decision.description.fingerprint
        for e in entries:
            if fingerprint is not None and e.source.fingerprint == fingerprint:
                return e.source.files
        with self._lock:
            files = self._lists.get(fingerprint) if fingerprint is not None else None
        if files is None:
            files = self.describe(plan, decision.ordinal, 2).files
            if fingerprint is not None:
                with self._lock:
                    self._lists[fingerprint] = files
        return files
