"""The files of a plan's relation, for index matching and cache serving: those an index
recorded of the same source version, else its difference to them (the JVM's answer, which
holds only the appended and deleted files), else described by the JVM; kept per
fingerprint."""
from __future__ import annotations

import json
import threading
from typing import Any

from cachetools import FIFOCache

from indexes.description import FileChanges, SourceDescription, SourceFile

#: file lists of sources no index recorded, kept per fingerprint (oldest dropped first)
FILE_LISTS_CACHED = 16
#: relations' differences to recorded files, kept per pair of fingerprints
CHANGES_CACHED = 64


class RelationFiles:
    """Lists the files of relations through the JVM (``plans``: the PlanRewrite helper)."""

    def __init__(self, plans: Any):
        self._plans = plans
        self._lock = threading.Lock()
        self._lists: FIFOCache = FIFOCache(FILE_LISTS_CACHED)
        self._changes: FIFOCache = FIFOCache(CHANGES_CACHED)

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
            recorded = next((e.source for e in entries if e.source.listing_key), None)
            changes = None if recorded is None else self.changes(plan, decision, recorded)
            files = (changes.applied_to(recorded.files) if changes is not None
                     else self.describe(plan, decision.ordinal, 2).files)
            if fingerprint is not None:
                with self._lock:
                    self._lists[fingerprint] = files
        return files

    def changes(self, plan: Any, decision: Any, recorded: SourceDescription
                ) -> FileChanges | None:
        """How the files of the relation of ``decision`` differ from those an index recorded
        (``recorded``, its source): the JVM's answer, which only the appended and deleted
        files cross py4j for (the recorded files cross once per index version and driver,
        kept by the JVM), kept per pair of fingerprints; None when the relation does not list
        its files or the index recorded none."""
        fingerprint = decision.description.fingerprint
        key = recorded.listing_key
        if fingerprint is None or key is None:
            return None
        with self._lock:
            found = self._changes.get((fingerprint, key))
        if found is not None:
            return found
        answer = self._plans.changes(plan, decision.ordinal, key)
        if answer is None:   # the JVM keeps no listing under that key (yet)
            self._plans.recordListing(key, json.dumps([f.to_json() for f in recorded.files],
                                                      separators=(",", ":")))
            answer = self._plans.changes(plan, decision.ordinal, key)
        data = None if answer is None else json.loads(answer)
        if data is None:
            return None
        found = FileChanges.from_json(data, key, recorded.files)
        with self._lock:
            self._changes[(fingerprint, key)] = found
        return found

