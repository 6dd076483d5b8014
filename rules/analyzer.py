"""The analyzer: demand rows and per-source statistics → scored :class:`Instruction` values,
chosen under budgets. Pure Python.

Per source (one with a profile and no NEVER rule): for each column looked up, the best by score
of a min/max, Bloom filter, value list or (when its queries read few columns) covering index;
min/max for a column filtered by ranges; a text index for a string column searched by text; a
covering index on each side of a join, the two chosen together or not at all; min/max on a fact
table's key joined to a filtered dimension (dynamic file pruning, :mod:`rules.join_pruning`); the
Parquet cache for a JSON, CSV or text source. What exists already, or is cooling down, is not
proposed; when an index serving a column's lookups exists, no other is proposed for them.

A candidate's score is its decayed demand (the summed weight of the demand rows it serves)
times the seconds it saves a query, minus its amortized cost ((build seconds + storage cost) /
:data:`AMORTIZATION_RUNS`). Candidates saving less than :data:`MIN_IMPROVEMENT` of their
queries' time or less than :data:`MIN_SECONDS_SAVED` a query, or scoring ≤ 0, are dropped (a
query's time goes to the sources it reads by their share of its bytes read:
:mod:`rules.extractor`); the rest are taken greedily by score within the
budgets. Engine indexes no demand row names any more are proposed for dropping.
"""
from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Callable, Collection, Mapping, Sequence

from rules.extractor import Demand
from rules.history.records import is_expression
from rules.instructions import Instruction, Target, engine_index_name, target_of
from rules.join_pruning import FactJoin, fact_join
from rules.profiles import ExistingIndex, SourceProfile
from rules.skipped import Skipped
from rules.terms import Priority
from rules.user_rules import RuleSet, scheme_less
from rules.whatif import CACHE_SPEEDUP, Candidate, Estimate, column_share, estimate, \
    seconds_per_query

log = logging.getLogger("accelerator.rules.analyzer")

#: a candidate must save at least this share of its queries' time (Azure's minimum improvement)
MIN_IMPROVEMENT = 0.2
#: by default, a candidate must save at least this many seconds a query: an index's own costs
#: in a query (matching it while planning, opening its files, a covering index's buckets) are
#: some tens of milliseconds, so a smaller saving may be none (an index on a small dimension of
#: a join whose time goes with the fact table); spark.accelerator.rules.minSecondsSaved
MIN_SECONDS_SAVED = 0.05
#: runs (of the analysis, each seeing the demand again) a candidate's cost is spread over
AMORTIZATION_RUNS = 10
#: the cost of storing a GiB, in seconds (a made-up exchange rate between bytes and time)
STORAGE_SECONDS_PER_GIB = 1.0
#: default index budget: this share of the profiled sources' bytes, for all the engine's indexes
#: (those it made already count with their bytes; users' indexes do not)
DEFAULT_INDEX_BYTES_SHARE = 0.25
#: default number of indexes per source, existing ones included
DEFAULT_MAX_INDEXES_PER_SOURCE = 8
#: default seconds of building (indexes and cache warm-ups) one analysis may ask for
DEFAULT_BUILD_SECONDS_PER_RUN = 600.0
#: a lookup's covering index is proposed only when it would hold at most this share of a row
COVERING_MAX_SHARE = 0.25

_NOUNS = {"lookup": "lookup", "range": "range filter", "text": "text search",
          "join": "join", "group": "grouping", "projection": "read"}
_PLURALS = {"text search": "text searches", "query": "queries"}
_WITH = {"minmax": "min/max statistics", "bloom": "a Bloom filter", "valuelist": "value lists",
         "text": "a text index"}


@dataclass(frozen=True)
class _Unit:
    """Candidates chosen together or not at all (one, or the two sides of a join), scored
    together: ``items`` are (candidate, estimate, reason)."""

    score: float
    keep: float
    saved: float        # seconds per query
    queries: int
    items: tuple[tuple[Candidate, Estimate, str], ...]

    @property
    def name(self) -> str:
        c = self.items[0][0]
        return engine_index_name(c.kind, c.source, c.columns)

    @property
    def order(self) -> tuple:
        """The order units are taken in: highest score first, ties by name, then by what they
        build (stable keys, whatever order they were found in)."""
        return -self.score, self.name, tuple((_target(c), c.included_columns)
                                             for c, _, _ in self.items)

    @property
    def viable(self) -> bool:
        return self.score > 0 and 1 - self.keep >= MIN_IMPROVEMENT


def _target(c: Candidate) -> Target:
    return target_of(c.source, c.kind, c.columns)


def _cost(e: Estimate) -> float:
    """A candidate's amortized cost in seconds."""
    storage = STORAGE_SECONDS_PER_GIB * e.index_bytes / 2 ** 30
    return (e.build_seconds + storage) / AMORTIZATION_RUNS


def _many(n: int, noun: str) -> str:
    """``1 lookup``, ``2 lookups``, ``3 text searches``."""
    return f"{n} {noun}" if n == 1 else f"{n} {_PLURALS.get(noun, noun + 's')}"


def _secs(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 0.1 else f"{seconds * 1000:.0f} ms"


def _age(demands: Sequence[Demand], now_ms: int | None) -> str:
    """``; last used 3 h ago`` (empty without ``now_ms``)."""
    if now_ms is None:
        return ""
    hours = max(0.0, (now_ms - max(d.last_seen for d in demands)) / 3.6e6)
    age = f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.0f} h" if hours < 48 \
        else f"{hours / 24:.0f} days"
    return f"; last used {age} ago"


def _about(saved: float) -> str:
    """A share of time or reading saved as the estimate it is: to the nearest 10% (``about
    60%``), ``over 90%`` or ``under 10%`` at the ends, never 100%."""
    if saved > 0.9:
        return "over 90%"
    if saved < 0.1:
        return "under 10%"
    return f"about {round(saved * 10) * 10}%"


def _each(seconds: float, demands: Sequence[Demand]) -> str:
    """The seconds a query takes and what the figure rests on: the queries' recorded runs, or
    the bytes they read at an assumed scan rate."""
    timed, queries = sum(d.timed for d in demands), sum(d.queries for d in demands)
    if timed == 0:
        return f"~{_secs(seconds)} each, estimated from the bytes read"
    runs = _many(timed, "run") if timed >= queries else f"{timed} of {_many(queries, 'run')}"
    return f"{_secs(seconds)} each, timed over {runs}"


def _files(e: Estimate, profile: SourceProfile) -> str:
    """`` (the what-if keeps ~2 of 100 files a query)`` for the kinds that skip files."""
    if e.files_kept is None:
        return ""
    return f" (the what-if keeps ~{math.ceil(e.files_kept):,} of {profile.files:,} files a query)"


def _reason(c: Candidate, profile: SourceProfile, demands: Sequence[Demand], e: Estimate,
            now_ms: int | None) -> str:
    """One sentence: who asks, what they would save (an estimate, rounded) and the evidence:
    the queries, their seconds and what those rest on, the files the what-if keeps."""
    saved = _about(1 - e.keep_fraction)
    weight = sum(d.weight for d in demands) or 1.0
    each = _each(sum(d.weight * seconds_per_query(profile, d) for d in demands) / weight,
                 demands)
    asked = f"{' and '.join(_many(d.queries, _NOUNS[d.use]) for d in demands)} of " \
            f"{demands[0].column} ({each})"
    if c.kind == "cache":
        return (f"{_many(demands[0].queries, 'query')} of {c.source} ({profile.format}, "
                f"{each}) would take {saved} less time reading its {len(c.columns)} columns "
                f"from a Parquet cache{_age(demands, now_ms)}")
    if c.kind == "covering":
        held = len(c.columns) + len(c.included_columns)
        return (f"{asked} would take {saved} less time with a covering index holding {held} "
                f"of {len(profile.all_columns)} columns{_age(demands, now_ms)}")
    column = profile.columns.get(c.columns[0])
    distinct = column.distinct_per_file or 0 if column is not None else 0
    why = {"minmax": ": each file holds a narrow range of values",
           "bloom": f": unclustered, ~{distinct:,.0f} values per file",
           "valuelist": f": ~{distinct:,.0f} values per file"}
    return (f"{asked} would read {saved} less with {_WITH[c.kind]}"
            f"{why.get(c.kind, '')}{_files(e, profile)}{_age(demands, now_ms)}")


def _single(c: Candidate, profile: SourceProfile, demands: Sequence[Demand],
            now_ms: int | None) -> _Unit:
    e = estimate(c, profile, demands)
    score = sum(d.weight for d in demands) * e.seconds_saved_per_query - _cost(e)
    return _Unit(score, e.keep_fraction, e.seconds_saved_per_query,
                 sum(d.queries for d in demands),
                 ((c, e, _reason(c, profile, demands, e, now_ms)),))


def _covering(profile: SourceProfile, lookup: Demand) -> Candidate | None:
    """A covering index for a column's lookups, when their queries read few columns."""
    if not lookup.columns_read or not profile.all_columns:
        return None
    included = tuple(sorted(lookup.columns_read - {lookup.column}))
    if column_share(profile, (lookup.column,) + included) > COVERING_MAX_SHARE:
        return None
    return Candidate("covering", lookup.source, (lookup.column,), included)


def _best(options: list[tuple[Candidate, Sequence[Demand]]], profile: SourceProfile,
          existing: set[Target], cooldown: set[Target], now_ms: int | None) -> _Unit | None:
    """The best viable unit among options serving the same queries; None when one of them
    exists already (they are served)."""
    if any(_target(c) in existing for c, _ in options):
        return None
    units = [_single(c, profile, ds, now_ms) for c, ds in options if _target(c) not in cooldown]
    viable = [u for u in units if u.viable]
    return min(viable, key=lambda u: u.order, default=None)


def _column_units(profile: SourceProfile, demands: Sequence[Demand], existing: set[Target],
                  cooldown: set[Target], now_ms: int | None) -> list[_Unit]:
    """The units for the columns of one source: lookups, ranges and text searches (the
    skipping kinds need the column's profile; without it they save nothing and drop out),
    none for a partition column."""
    uses: dict[str, dict[str, Demand]] = defaultdict(dict)
    for d in demands:
        uses[d.column][d.use] = d
    source = demands[0].source
    out: list[_Unit | None] = []
    for column, by_use in sorted(uses.items()):
        if column in profile.partition_columns:   # Spark prunes its partitions already
            continue
        found = profile.columns.get(column)
        lookup, ranges, text = by_use.get("lookup"), by_use.get("range"), by_use.get("text")

        def option(kind: str, *served: Demand | None) -> tuple[Candidate, list[Demand]]:
            return (Candidate(kind, source, (column,)), [d for d in served if d])

        best = None
        if lookup is not None:
            pool = [option("minmax", lookup, ranges), option("bloom", lookup),
                    option("valuelist", lookup)]
            covering = None if is_expression(column) else _covering(profile, lookup)
            if covering is not None:
                pool.append((covering, [lookup]))
            best = _best(pool, profile, existing, cooldown, now_ms)
            out.append(best)
        if ranges is not None and (best is None or best.items[0][0].kind != "minmax"):
            out.append(_best([option("minmax", ranges)], profile, existing, cooldown, now_ms))
        if text is not None and found is not None and not is_expression(column) \
                and found.type.lower().startswith(("string", "varchar", "char")):
            out.append(_best([option("text", text)], profile, existing, cooldown, now_ms))
    return [u for u in out if u is not None]


def _join_units(demands: Sequence[Demand], profiles: Mapping[str, SourceProfile],
                rules: RuleSet, existing: set[Target], cooldown: set[Target],
                now_ms: int | None, broadcasts: bool, failures: "_Failures") -> list[_Unit]:
    """A unit per join: a covering index on the key of each side (those that do not exist
    yet), indexed on the key and including the columns that side's queries read. A self-join
    on one column (a source joined with itself on the same key, as through a CTE) has one side:
    one covering index serves both of its relations."""
    joins = {(d.source, d.column): d for d in demands if d.use == "join"}
    seen: set[frozenset] = set()
    out = []
    for key, d in sorted(joins.items()):
        for partner in sorted(d.partners):
            pair = frozenset({key, partner})
            if pair in seen or partner not in joins:
                continue
            seen.add(pair)
            sides = [joins[k] for k in sorted(pair)]
            if any(s.source not in profiles or rules.never(s.source) is not None
                   or not s.columns_read for s in sides):
                continue

            def unit(sides: list[Demand] = sides) -> list[_Unit]:
                if not _shuffles(sides, demands, broadcasts):
                    return []
                found = _pair(sides, profiles, existing, cooldown, now_ms)
                return [found] if found is not None and found.viable else []
            out += failures.run(d, unit)
    return out


def _shuffles(sides: Sequence[Demand], demands: Sequence[Demand], broadcasts: bool) -> bool:
    """Whether the join of its sides (two, or one for a self-join on one column) shuffles, so
    bucketed indexes would spare its exchanges: as its executed queries did (more shuffle joins
    than broadcast ones, counted from either side), else, when none was recorded, unless Spark
    may broadcast and a side is filtered in every query (:func:`_filtered`)."""
    runs: Counter = Counter()
    for mine in sides:
        partners = {o.source for o in sides if o is not mine} or {mine.source}
        for partner, strategy, queries in mine.joined_by:
            if partner in partners:
                runs[strategy] = max(runs[strategy], queries)
    if runs:
        return runs["shuffle"] > runs["broadcast"]
    return not (broadcasts and any(
        _filtered(s, next((o for o in sides if o is not s), s), demands) for s in sides))


def _filtered(side: Demand, other: Demand, demands: Sequence[Demand]) -> bool:
    """Whether every query of a join side also filters that side: Spark's adaptive execution
    then often broadcasts the filtered side, which a pair of bucketed indexes would prevent
    (measured: such joins got 1.1-1.5x slower with the pair). As the pairs recorded with the
    ``other`` side say, else (a history written before them) when the side's source is
    filtered in every template the side joins in."""
    recorded = [f for s, c, _, f in other.paired if (s, c) == (side.source, side.column)]
    if recorded:
        return all(recorded)
    filters = [d for d in demands if d.source == side.source and d.use in ("lookup", "range",
                                                                             "text")]
    return bool(side.templates) and all(any(t in d.templates for d in filters)
                                        for t in side.templates)


def _pair(sides: Sequence[Demand], profiles: Mapping[str, SourceProfile],
          existing: set[Target], cooldown: set[Target], now_ms: int | None) -> _Unit | None:
    """The covering indexes a join's sides need (one for a self-join on one column), scored
    together (None: nothing to build)."""
    found = []
    for s in sides:
        c = Candidate("covering", s.source, (s.column,),
                      tuple(sorted(s.columns_read - {s.column})))
        found.append((c, estimate(c, profiles[s.source], [s]), s))
    todo = [(c, e, s) for c, e, s in found if _target(c) not in existing]
    if not todo or any(_target(c) in cooldown for c, _, _ in todo):
        return None
    keep = sum(e.keep_fraction for _, e, _ in found) / len(found)
    # each source's share of its queries' time: together, the time of the join's queries
    sp = sum({s.source: seconds_per_query(profiles[s.source], s) for s in sides}.values())
    saved = sp * (1 - keep)
    score = min(s.weight for s in sides) * saved - sum(_cost(e) for _, e, _ in todo)
    queries = min(s.queries for s in sides)
    gain = f"({_each(sp, sides)}) would take {_about(1 - keep)} less time"
    items = []
    for c, e, s in todo:
        if len(sides) == 1:
            why = (f"{_many(queries, 'self-join')} of {s.source} on {s.column} {gain} with a "
                   f"covering index on {s.column} serving both sides")
        else:
            other, twin = next((o, oc) for oc, _, o in found if o is not s)
            why = (f"{_many(queries, 'join')} of {s.column} of {s.source} with {other.column} of "
                   f"{other.source} {gain} with covering indexes on both sides (paired with "
                   f"{engine_index_name(twin.kind, twin.source, twin.columns)})")
        items.append((c, e, why + _age(sides, now_ms)))
    return _Unit(score, keep, saved, queries, tuple(items))


def _pruning_units(demands: Sequence[Demand], profiles: Mapping[str, SourceProfile],
                   rules: RuleSet, existing: set[Target], cooldown: set[Target],
                   now_ms: int | None, failures: "_Failures") -> list[_Unit]:
    """A min/max sketch on each fact key joined to a filtered dimension whose keys would skip
    enough of the fact's files through the join (:func:`rules.join_pruning.fact_join`)."""
    out = []
    for d in demands:
        c = Candidate("minmax", d.source, (d.column,))
        if d.use != "join" or rules.never(d.source) is not None \
                or _target(c) in existing | cooldown:
            continue

        def unit(d: Demand = d, c: Candidate = c) -> list[_Unit]:
            j = fact_join(d, demands, profiles)
            if j is None:
                return []
            profile = profiles[d.source]
            e = estimate(c, profile, [d], file_keeps=[j.keep])
            found = _Unit(d.weight * e.seconds_saved_per_query - _cost(e), e.keep_fraction,
                          e.seconds_saved_per_query, d.queries,
                          ((c, e, _pruning_reason(j, profile, e, now_ms)),))
            return [found] if found.viable else []
        out += failures.run(d, unit)
    return out


def _pruning_reason(j: FactJoin, profile: SourceProfile, e: Estimate,
                    now_ms: int | None) -> str:
    """Who asks (the joins, their templates and seconds), what they would save and the
    evidence: what the dimension's filters keep, the fact files the what-if keeps."""
    d, files = j.fact, profile.files
    each = _each(seconds_per_query(profile, d), [d])
    if j.share is None:
        kept = (f"its filters bound {j.dimension_key} itself; the what-if keeps "
                f"~{math.ceil(j.keep * files):,} of {files:,} files a query")
    else:
        bound = (f"in {j.bounded} template{'s' if j.bounded > 1 else ''} bound "
                 f"{j.dimension_key} itself, in the others " if j.bounded else "")
        kept = (f"its filters {bound}keep at most ~{j.share:.1%} of its rows on average "
                f"(~{j.keys:,.0f} keys); "
                f"the what-if keeps ~{math.ceil(j.keep * files):,} (keys contiguous, as a "
                f"date dimension's) to ~{math.ceil(j.keep_high * files):,} (keys scattered) of "
                f"{files:,} files a query")
    return (f"{_many(d.queries, 'join')} of {d.column} of {d.source} with {j.dimension_key} of "
            f"{j.dimension} filtered on {', '.join(j.filters)} ({j.filtered} of "
            f"{len(d.templates)} templates; {each}) would read {_about(1 - e.keep_fraction)} "
            f"less with min/max statistics on {d.column} pruning its files through the join: "
            f"{kept}{_age([d], now_ms)}")


def _cache_unit(profile: SourceProfile, demands: Sequence[Demand], cooldown: set[Target],
                now_ms: int | None) -> _Unit | None:
    """The Parquet cache of a JSON, CSV or text source, holding the top-level data columns its
    queries read. Demand rows of one source overlap (a query makes a row per column it uses):
    the cache counts the queries of the heaviest row, a lower bound."""
    if profile.format not in CACHE_SPEEDUP:
        return None
    named = {c for d in demands for c in d.columns_read}
    named |= {d.column for d in demands if not is_expression(d.column)}   # JSON paths: read
    # partition values are kept with every entry, not cached as columns
    columns = sorted({c.split(".", 1)[0] for c in named} - set(profile.partition_columns))
    c = Candidate("cache", demands[0].source, tuple(columns))
    if _target(c) in cooldown:
        return None
    heaviest = min(demands, key=lambda d: (-d.weight, d.column, d.use))
    unit = _single(c, profile, [heaviest], now_ms)
    return unit if unit.viable else None


def _drops(demands: Sequence[Demand], existing: Sequence[ExistingIndex]) -> list[Instruction]:
    """Drop instructions for the engine's indexes whose columns no demand row names."""
    used = {(scheme_less(d.source), d.column) for d in demands}
    return [Instruction("drop", e.kind, e.source, tuple(e.columns), name=e.name,
                        reason=f"no query in the history uses {', '.join(e.columns)} of "
                               f"{e.source} any more")
            for e in sorted(existing, key=lambda e: (e.name, e.target))
            if e.origin == "engine"
            and not any((scheme_less(e.source), c) in used for c in e.columns)]


def analyze(demands: list[Demand], profiles: Mapping[str, SourceProfile], rules: RuleSet,
            existing: Sequence[ExistingIndex] = (), *,
            cache_capacity_bytes: int | None = None,
            cooldown: Collection[Target] = (),
            now_ms: int | None = None, broadcasts: bool = True,
            min_seconds_saved: float = MIN_SECONDS_SAVED,
            skipped: list[Skipped] | None = None) -> list[Instruction]:
    """The instructions the demand calls for: creations (and the cache) by score, highest first,
    within the budgets of ``rules.budget`` (defaults: indexes 25% of the profiled sources'
    bytes, the cache ``cache_capacity_bytes`` (none when both are None), 8 indexes per source
    counting existing ones, 600 build seconds), then drops of the engine's indexes no demand
    uses. ``profiles`` are keyed by ``Demand.source``; ``cooldown`` holds targets (scheme-less
    source, kind, sorted columns) not to propose again yet; ``now_ms`` dates the reasons' "last
    used". An instruction's ``estimated_seconds_saved`` is per query, its ``queries`` the
    queries it serves. A join gets a pair of covering indexes when its recorded executions
    shuffled (see :func:`_shuffles`); without any, ``broadcasts`` says whether Spark may
    broadcast a join's small side (then a side filtered in every join gets no pair). Nothing
    saving less than ``min_seconds_saved`` a query is proposed. When one analysis raises (of
    a source's columns, of a join, of a fact key), the advice it would give is left out and the
    rest kept: logged, and counted per source in ``skipped`` when given (``analysis-failed``,
    with the source's queries: at least its busiest demand row's)."""
    existing = list(existing)
    have = {e.target for e in existing}
    cooling = {target_of(*t) for t in cooldown}
    by_source: dict[str, list[Demand]] = defaultdict(list)
    for d in demands:
        by_source[d.source].append(d)
    units: list[_Unit] = []
    failures = _Failures()
    for source, found in sorted(by_source.items()):
        profile = profiles.get(source)
        if profile is None or rules.never(source) is not None:
            continue

        def of_source(profile: SourceProfile = profile, found: list[Demand] = found
                      ) -> list[_Unit]:
            cache = _cache_unit(profile, found, cooling, now_ms)
            return _column_units(profile, found, have, cooling, now_ms) + (
                [cache] if cache is not None else [])
        units += failures.run(found[0], of_source)
    units += _join_units(demands, profiles, rules, have, cooling, now_ms, broadcasts, failures)
    units += _pruning_units(demands, profiles, rules, have, cooling, now_ms, failures)
    if skipped is not None:
        skipped += failures.skips(demands)
    units = [u for u in units if u.saved >= min_seconds_saved]
    drops = _drops(demands, existing)
    dropped = {i.name for i in drops}
    kept = [e for e in existing if e.name not in dropped]
    counts = Counter(scheme_less(e.source) for e in kept)
    engine_bytes = sum({e.name: e.bytes for e in kept if e.origin == "engine"}.values())
    chosen = _choose(units, rules, profiles, counts, cache_capacity_bytes, engine_bytes)
    return sorted(chosen, key=lambda i: (-i.score, i.name or "", i.target)) + drops


class _Failures:
    """The sources whose analysis raised, with the first error of each."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}

    def run(self, demand: Demand, make: Callable[[], list[_Unit]]) -> list[_Unit]:
        """``make()``, or nothing when it raises (the failure noted on ``demand``'s source)."""
        try:
            return make()
        except Exception as exc:  # noqa: BLE001 - one source's failure keeps the others' advice
            error = f"{demand.column} ({demand.use}): {type(exc).__name__}: {exc}"
            log.warning("rule engine: the analysis of %s failed, its advice left out "
                        "(analysis-failed): %s", demand.source, error, exc_info=True)
            self.errors.setdefault(demand.source, error)
            return []

    def skips(self, demands: Sequence[Demand]) -> list[Skipped]:
        """One :class:`Skipped` per failed source, in the order of the sources."""
        return [Skipped("analysis-failed", max(d.queries for d in demands if d.source == s),
                        s, self.errors[s]) for s in sorted(self.errors)]


def _choose(units: list[_Unit], rules: RuleSet, profiles: Mapping[str, SourceProfile],
            counts: Counter, cache_capacity_bytes: int | None,
            engine_bytes: int) -> list[Instruction]:
    """Units taken greedily by score (ties by name), each skipped when it would exceed a
    budget; a side a join shares with a unit already taken is not counted twice."""
    b = rules.budget
    index_left = (b.index_bytes if b.index_bytes is not None else
                  DEFAULT_INDEX_BYTES_SHARE * sum(p.bytes for p in profiles.values())) \
        - engine_bytes   # what the engine's indexes hold already
    cache_left = b.cache_bytes if b.cache_bytes is not None else cache_capacity_bytes
    per_source = b.max_indexes_per_source if b.max_indexes_per_source is not None else \
        DEFAULT_MAX_INDEXES_PER_SOURCE
    build_left = b.build_seconds_per_run if b.build_seconds_per_run is not None else \
        DEFAULT_BUILD_SECONDS_PER_RUN
    taken: set[Target] = set()
    out = []
    for unit in sorted(units, key=lambda u: u.order):
        new = [(c, e, r) for c, e, r in unit.items if _target(c) not in taken]
        index_need = sum(e.index_bytes for c, e, _ in new if c.kind != "cache")
        cache_need = sum(e.index_bytes for c, e, _ in new if c.kind == "cache")
        build_need = sum(e.build_seconds for _, e, _ in new)
        added = Counter(scheme_less(c.source) for c, _, _ in new if c.kind != "cache")
        caches = any(c.kind == "cache" for c, _, _ in new)
        no_cache_room = caches and (cache_left is None or cache_need > cache_left)
        too_many = any(counts[s] + n > per_source for s, n in added.items())
        if index_need > index_left or build_need > build_left or no_cache_room or too_many:
            continue
        index_left -= index_need
        build_left -= build_need
        if cache_left is not None:
            cache_left -= cache_need
        counts.update(added)
        for c, e, reason in new:
            taken.add(_target(c))
            cache = c.kind == "cache"
            out.append(Instruction(
                "cache" if cache else "create", c.kind, c.source, c.columns, c.included_columns,
                None if cache else engine_index_name(c.kind, c.source, c.columns),
                Priority.MEDIUM, None, "engine", score=unit.score,
                estimated_seconds_saved=unit.saved, estimated_bytes=int(e.index_bytes),
                queries=unit.queries, reason=reason))
    return out
