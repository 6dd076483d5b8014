"""The demoter's policy: which cache entries to evict, and why. Pure Python, no JVM.

One pass (as Starburst Warp Speed's demoter does it, not a per-access LRU):

1. every expired entry goes, whatever the usage (:meth:`CacheEntry.expired`: TTL run out since
   last use);
2. then, if the bytes of the ACTIVE entries left are more than ``max_usage_percent`` of
   ``max_bytes``, entries go lowest priority first (LOW, then MEDIUM, then HIGH), least recently
   used first within one priority, until usage is below ``cleanup_percent``.

ALWAYS entries are exempt from both steps: they never expire and are never evicted for space;
:func:`check_always_fits` refuses warm-ups that would put more ALWAYS bytes in the cache than
it holds. EVICTED entries are ignored (they are already on their way out).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable

from accelerator.cache.model import CacheCapacityError, CacheEntry, Priority
from indexes.errors import CacheRequestError


class EvictionReason(str, enum.Enum):
    EXPIRED = "EXPIRED"
    SPACE = "SPACE"


@dataclass(frozen=True)
class Eviction:
    """One entry the demoter evicts, and why."""

    entry: CacheEntry
    reason: EvictionReason


def usage_percent(entries: Iterable[CacheEntry], max_bytes: int) -> float:
    """The bytes of the ACTIVE ``entries`` as a percentage of ``max_bytes``."""
    return 100.0 * sum(e.bytes for e in entries if e.active) / max_bytes


def _check_thresholds(max_bytes: int, max_usage_percent: float, cleanup_percent: float) -> None:
    if max_bytes <= 0:
        raise CacheRequestError(f"the cache size must be positive, got {max_bytes} bytes")
    if not 0 < cleanup_percent < max_usage_percent <= 100:
        raise CacheRequestError(
            f"cache thresholds must satisfy 0 < cleanup ({cleanup_percent}%) < maximum usage "
            f"({max_usage_percent}%) <= 100")


def choose_evictions(entries: Iterable[CacheEntry], now: float, max_bytes: int,
                     max_usage_percent: float = 90.0,
                     cleanup_percent: float = 80.0) -> list[Eviction]:
    """The entries to evict, in order: expired ones (least recently used first), then for
    space (lowest priority, then least recently used, first). See the module docstring."""
    _check_thresholds(max_bytes, max_usage_percent, cleanup_percent)
    lru = sorted((e for e in entries if e.active), key=lambda e: (e.last_used, e.key))
    out = [Eviction(e, EvictionReason.EXPIRED) for e in lru if e.expired(now)]
    left = [e for e in lru if not e.expired(now)]
    used = sum(e.bytes for e in left)
    if 100.0 * used / max_bytes <= max_usage_percent:
        return out
    candidates = sorted((e for e in left if e.priority is not Priority.ALWAYS),
                        key=lambda e: (e.priority, e.last_used, e.key))
    for entry in candidates:
        if 100.0 * used / max_bytes < cleanup_percent:
            break
        out.append(Eviction(entry, EvictionReason.SPACE))
        used -= entry.bytes
    return out


def check_always_fits(entries: Iterable[CacheEntry], new_bytes: int, max_bytes: int,
                      replacing: Iterable[CacheEntry] = ()) -> None:
    """Raises :class:`CacheCapacityError` when adding an ALWAYS entry of ``new_bytes`` (in
    place of the entries ``replacing``, e.g. a warm-up plan's ``supersedes``) would make the
    ACTIVE ALWAYS entries hold more than ``max_bytes``."""
    gone = {e.key for e in replacing}
    pinned = sum(e.bytes for e in entries
                 if e.active and e.priority is Priority.ALWAYS and e.key not in gone)
    if pinned + new_bytes > max_bytes:
        raise CacheCapacityError(
            f"cannot warm {new_bytes} bytes at priority ALWAYS: the cache already holds "
            f"{pinned} bytes of ALWAYS entries and its size is {max_bytes} bytes "
            f"({pinned + new_bytes} > {max_bytes}); use a lower priority, evict ALWAYS entries "
            f"or enlarge the cache")
