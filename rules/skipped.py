"""Recorded queries the rule engine left out of its advice, counted by a stable reason code, so
that one query (or one source) it cannot understand costs only its own advice and says so.
Pure Python.

The codes (:data:`CODES`) are stable: scripts may match them. ``recommend()`` reports each as a
``skip`` row (its ``kind`` the code, ``queries`` the count, ``reason`` a sentence with the first
example), and the advisor logs them.
"""
from __future__ import annotations

from dataclasses import dataclass

from rules.instructions import Instruction
__all__ = ["CODES", "Skipped"]

#: reason code → what it means, in the sentence of a skip row
CODES = {
    # a recorded query whose record the extractor cannot read (a shape it does not know)
    "unreadable-record": "the engine could not read their records",
    # a source read by recorded queries that cannot be profiled now (gone, or unreadable)
    "unprofiled-source": "their source could not be profiled",
    # the analysis of one source's demand failed (its queries' advice on it is left out)
    "analysis-failed": "the analysis of their source's demand failed",
}


@dataclass(frozen=True)
class Skipped:
    """``queries`` recorded queries left out for the reason ``code`` (one of :data:`CODES`),
    of ``source`` when the reason concerns one (else None); ``example`` names the first one and
    its error."""

    code: str
    queries: int
    source: str | None = None
    example: str = ""

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown skip code {self.code!r}: expected one of {list(CODES)}")

    def sentence(self) -> str:
        """``3 recorded queries skipped (unreadable-record): the engine could not read their
        records; first: q7: TypeError: ...``."""
        of = f" of {self.source}" if self.source else ""
        first = f"; first: {self.example}" if self.example else ""
        plural = "query" if self.queries == 1 else "queries"
        return (f"{self.queries} recorded {plural}{of} skipped ({self.code}): "
                f"{CODES[self.code]}{first}")


    def instruction(self) -> Instruction:
        """The ``skip`` instruction reporting it: ``kind`` the code, ``source`` the source (or
        empty), ``queries`` the count, ``reason`` :meth:`sentence`; carrying it out does
        nothing."""
        return Instruction("skip", self.code, self.source or "", (), queries=self.queries,
                           reason=self.sentence())
