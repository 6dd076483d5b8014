"""The rule engine's Spark side: mine the history of a system path into instructions, and carry
them out through the session's operations.

:class:`Advisor` reads the recorded queries (:mod:`rules.history.reader`), turns them into
demand (:mod:`rules.extractor`), profiles the demanded sources
(:mod:`accelerator.engine.profiling`), asks the analyzer (:mod:`rules.analyzer`) for the engine's
instructions, adds the user rules' own (:func:`rules.instructions.from_user_rule`) and merges
them (NEVER > user > engine). Carrying an instruction out is one operation of the session's
:class:`~accelerator.context.AcceleratorContext`: ``create`` with the config the kind gives for
it (the index marked as the engine's or the user rule's in its log), ``cache``, ``delete`` +
``vacuum``, ``uncache`` or ``refresh``; one failing instruction never stops the others.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from datetime import date, datetime, timezone
from dataclasses import dataclass
from typing import Any, Iterable

from cachetools import LRUCache
from pyspark.sql import DataFrame, SparkSession

from accelerator.context import AcceleratorContext
from accelerator.engine.carrying_out import carry_out
from accelerator.engine.profiling import profile_source, read_source
from accelerator.runtime import spark_versions
from accelerator.runtime.settings import RuleSettings
from indexes import kinds
from indexes.actions import ORIGIN_KEY
from indexes.log import IndexLogEntry, IndexState
from rules.analyzer import analyze
from rules.extractor import Demand, extract, extract_with_skips
from rules.history.reader import RecordCache
from rules.history.records import QueryRecord, RelationUsage, source_key
from rules.instructions import Instruction, from_user_rule, merge
from rules.probation import Action, ActionLog, cooling_down, new_action, verdict
from rules.profiles import ExistingIndex, SourceProfile
from rules.skipped import Skipped
from rules.terms import byte_size, format_duration
from rules.user_rules import Budget, RuleSet, UserRule, load_rules_file, scheme_less, \
    source_matches

log = logging.getLogger("accelerator.engine.advisor")

__all__ = ["Advisor", "Applied", "error_line"]
#: sources profiled per recommendation at most (the most demanded first)
MAX_SOURCES = 32
#: source profiles kept for the next recommend() (the least recently used dropped first)
PROFILES_KEPT = 64
#: uses whose columns are profiled (their values decide between index kinds; a join key's
#: ranges, whether a filtered dimension's keys would prune its files: rules.join_pruning)
_PROFILED_USES = ("lookup", "range", "text", "join")
#: an engine index no query used this long is dropped, and the engine's cache entries expire
#: after this long unused, unless the rules set a default TTL
DEFAULT_INDEX_TTL_S = 7 * 86400
#: how the reason of an instruction undoing an action its probation found harmful starts
PROBATION = "probation: "



@dataclass(frozen=True)
class Applied:
    """What carrying out one instruction did: ``status`` ``applied``, ``failed`` (``message``
    names the error), ``planned`` (a dry run; ``message`` is the instruction's reason) or
    ``skipped`` (a ``skip`` instruction, which does nothing; ``message`` is its reason)."""

    instruction: Instruction
    status: str
    message: str
    seconds: float

    @property
    def applied(self) -> bool:
        return self.status == "applied"


def _either(value: Any, default: Any) -> Any:
    return default if value is None else value


def _since_ms(since: Any) -> int | None:
    if since is None:
        return None
    if isinstance(since, str):
        since = datetime.fromisoformat(since)
    if isinstance(since, datetime):
        aware = since if since.tzinfo is not None else since.astimezone()
        return int(aware.timestamp() * 1000)
    if isinstance(since, date):
        return int(datetime(since.year, since.month, since.day, tzinfo=timezone.utc)
                   .timestamp() * 1000)
    raise TypeError(f"since must be None, a datetime, a date or an ISO string, got {since!r}")


class Advisor:
    """The rule engine of one session and its system path."""

    def __init__(self, context: AcceleratorContext, rules: RuleSet | None = None):
        """The rule engine of ``context``'s session, following ``rules`` (default: the
        session's ``spark.accelerator.rules.path``, read at each use)."""
        self._context = context
        self._fixed_rules = rules
        self._profiles: dict[str, SourceProfile] = {}
        self._usages: dict[str, RelationUsage] = {}
        self._demand: list[Demand] = []
        self._history = RecordCache()   # each history file is parsed once per advisor
        # by (source, its files): its profile and the uses each column was profiled for; while
        # its files do not change, a source is read again only for columns (or uses) new to
        # the demand (the least recently used dropped first)
        self._profiled: LRUCache = LRUCache(PROFILES_KEPT)

    @property
    def spark(self) -> SparkSession:
        return self._context.spark

    # --- rules ----------------------------------------------------------------------------
    def rules(self) -> RuleSet:
        """The user rules (those given, else those of ``spark.accelerator.rules.path``, none
        when unset), with the session's budgets where the rules set none."""
        settings = RuleSettings.of_session(self.spark)
        found = self._fixed_rules
        if found is None:
            found = load_rules_file(settings.rules_path) if settings.rules_path else RuleSet()
        b = found.budget
        budget = Budget(_either(b.index_bytes, settings.index_bytes),
                        _either(b.cache_bytes, settings.cache_bytes),
                        _either(b.max_indexes_per_source, settings.max_indexes_per_source),
                        _either(b.build_seconds_per_run, settings.build_seconds_per_run))
        return dataclasses.replace(found, budget=budget)

    def columns_of(self, rule: UserRule) -> list[str] | None:
        """The top-level columns of a rule's source, to check the columns the rule names: as
        the history read the source, else as the rule says to read it (its format; not JSON
        without a schema, whose columns only a scan of every file would find). None when
        neither applies or the source cannot be read now."""
        if not self._usages:
            self._usages.update(_latest_usages(self.records()))
        wanted = scheme_less(rule.source)
        usage = next((u for u in self._usages.values()
                      if [scheme_less(p) for p in u.root_paths] == [wanted]), None)
        if usage is None and rule.format and (rule.schema or rule.format.lower() != "json"):
            usage = _usage_of_rule(rule)
        if usage is None:
            return None
        try:
            return read_source(self.spark, usage).schema.fieldNames()
        except Exception:  # noqa: BLE001 - unreadable now: not checked
            log.debug("cannot read the schema of %s", rule.source, exc_info=True)
            return None

    # --- what to do -----------------------------------------------------------------------
    def records(self, since: Any = None) -> list[QueryRecord]:
        """The recorded queries of the system path (since ``since``), after writing what this
        process still buffers (with the costs of the queries that finished); Spark's own
        schema inference, which histories written before it was left out may hold, is not
        one of them."""
        system_path = self._context.settings().system_path
        self._context.flush_history()
        start = _since_ms(since)
        day = None if start is None else datetime.fromtimestamp(start / 1000, timezone.utc).date()
        records = self._history.records(self._context.fs, system_path, day)
        return [r for r in records if (start is None or r.timestamp >= start)
                and not r.schema_inference]

    def recommend(self, since: Any = None) -> list[Instruction]:
        """The instructions to carry out now: the user rules', then the engine's (see the
        module docstring), then a ``skip`` instruction per reason recorded queries were left
        out of the advice (:mod:`rules.skipped`: a record the engine cannot read, a source it
        cannot profile, a source whose analysis failed), the others' advice kept. Actions
        whose probation ended well are marked kept on the way."""
        rules = self.rules()
        records = self.records(since)
        now = int(time.time() * 1000)
        settings = RuleSettings.of_session(self.spark)
        demand, skipped = extract_with_skips(records, now, settings.half_life_seconds)
        self._usages.update(_latest_usages(records))
        sources = _ranked_sources(demand, rules)[:MAX_SOURCES]
        errors: dict[str, str] = {}
        self._profiles = {s: p for s in sources
                          if (p := self._profile(s, demand, errors)) is not None}
        skipped += [Skipped("unprofiled-source", _queries_of(records, s), s, errors[s])
                    for s in sorted(errors)]
        self._demand = demand
        entries = self._context.lifecycle().list()   # the index logs, read once
        existing = existing_indexes(entries)
        actions = self._actions().read()
        reverts = self._review(actions, records, now)
        ttl = rules.default_ttl_seconds or DEFAULT_INDEX_TTL_S
        engine = [dataclasses.replace(i, ttl_seconds=ttl) if i.kind == "cache" and
                  i.ttl_seconds is None else i
                  for i in analyze(demand, self._profiles, rules, existing,
                                   cache_capacity_bytes=self._cache_capacity(),
                                   cooldown=cooling_down(actions, now), now_ms=now,
                                   broadcasts=self._broadcasts(),
                                   min_seconds_saved=settings.min_seconds_saved,
                                   skipped=skipped)]
        unused = _unused(existing, entries, records, rules, now)
        user = list(self._user_instructions(rules, existing))
        return merge(user, reverts + unused + engine, rules,
                     [e.name for e in existing if e.origin == "engine"]) + \
            [s.instruction() for s in skipped]

    # --- probation --------------------------------------------------------------------------
    def _actions(self) -> ActionLog:
        return ActionLog(self._context.fs, self._context.settings().system_path)

    def _review(self, actions: list[Action], records: list[QueryRecord],
                now: int) -> list[Instruction]:
        """Judges the actions on probation: keeps those that slowed no query template, and
        returns the instructions undoing the others."""
        log_ = self._actions()
        undo = []
        for a in actions:
            if a.state != "probation":
                continue
            found, why = verdict(a, records)
            if found == "keep":
                log_.decide(a, "kept", why, now)
            elif found == "revert":
                undo.append(Instruction("uncache" if a.action == "cache" else "drop", a.kind,
                                        a.source, a.columns, name=a.name, origin="engine",
                                        reason=f"{PROBATION}{why}"))
        return undo

    def _current_demand(self) -> list[Demand]:
        """The demand of the last :meth:`recommend`, else of the history now (instructions
        recommended earlier, or by another process)."""
        if not self._demand:
            self._demand = extract(self.records(), int(time.time() * 1000),
                                   RuleSettings.of_session(self.spark).half_life_seconds)
        return self._demand

    def _probation_start(self, i: Instruction) -> None:
        """Puts an engine action just carried out on probation, with the query templates of
        the demand it serves."""
        columns = set(i.columns) | set(i.included_columns)
        templates = {t for d in self._current_demand() if d.source == i.source
                     and d.column in columns for t in d.templates}
        self._actions().write(new_action(i.action, i.kind, i.source, i.columns, i.name,
                                         templates, int(time.time() * 1000)))

    def _probation_end(self, i: Instruction) -> None:
        """Marks the action an undo instruction reverted, with an event saying why."""
        now = int(time.time() * 1000)
        log_ = self._actions()
        for a in log_.read():
            if a.state == "probation" and a.target == i.target:
                log_.decide(a, "reverted", i.reason, now)
        zero = {"files": 0, "levels": [], "rows": 0, "bytes": 0}
        self._context.events().write(
            "revert", i.name or i.source, "probation", now, now, None, zero, zero,
            message=i.reason)

    def _profile(self, source: str, demand: list[Demand],
                 errors: dict[str, str] | None = None) -> SourceProfile | None:
        """The profile of ``source`` for the columns ``demand`` names; None when the history
        does not say how to read it, or it cannot be read now (the error put in ``errors``)."""
        usage = self._usages.get(source)
        if usage is None:
            return None
        columns: dict[str, set[str]] = {}
        for d in demand:
            if d.source == source and d.use in _PROFILED_USES:
                columns.setdefault(d.column, set()).add(d.use)
        try:
            files = self._files(usage)
            key = (source, tuple(files))
            known, profiled = self._profiled.get(key, (None, {}))
            todo = {c: frozenset(u) | profiled.get(c, frozenset()) for c, u in columns.items()
                    if not u <= profiled.get(c, frozenset())}
            if known is None or todo:
                fresh = profile_source(self.spark, usage, files, todo)
                known = dataclasses.replace(fresh, columns={
                    **(known.columns if known is not None else {}), **fresh.columns})
                profiled = {**profiled, **todo}
            self._profiled[key] = (known, profiled)
            return dataclasses.replace(known, columns={c: p for c, p in known.columns.items()
                                                       if c in columns})
        except Exception as exc:  # noqa: BLE001 - a source gone or unreadable is skipped
            log.warning("rule engine: cannot profile %s (unprofiled-source): %s", source, exc)
            if errors is not None:
                errors[source] = f"{type(exc).__name__}: {error_line(exc)}"
            return None

    def _files(self, usage: RelationUsage) -> list[tuple[str, int]]:
        source = self._context.sources.describe_source(read_source(self.spark, usage))
        return [(str(f.path), int(f.size)) for f in source.files]

    def _broadcasts(self) -> bool:
        """Whether Spark may broadcast a join's small side, planning or adaptively."""
        conf = self.spark.conf
        planned = conf.get("spark.sql.autoBroadcastJoinThreshold", "10MB")
        adaptive = conf.get("spark.sql.adaptive.autoBroadcastJoinThreshold", None) or planned
        return any(byte_size(t) > 0 for t in (planned, adaptive))

    def _cache_capacity(self) -> int | None:
        settings = self._context.settings()
        if not settings.cache_enabled:
            return None
        try:
            return int(self._context.cache.tier(settings).max_bytes(settings.cache_max_bytes))
        except Exception:  # noqa: BLE001 - no cache capacity known: no cache instructions
            log.debug("cache capacity unknown", exc_info=True)
            return None

    def _add_rule_sources(self, rules: RuleSet) -> None:
        """Makes the sources of rules that name their format, and match no source the history
        read, sources to read as the rules say."""
        roots = [p for u in self._usages.values() for p in u.root_paths]
        for rule in rules.rules:
            if rule.format and not rule.never and not any(rule.matches(p) for p in roots):
                self._usages.setdefault(rule.source, _usage_of_rule(rule))

    def _user_instructions(self, rules: RuleSet,
                           existing: list[ExistingIndex]) -> Iterable[Instruction]:
        """Each non-NEVER rule, for every source of the history it matches (or its own source
        when it names how to read it), unless what it asks for exists already."""
        have = {e.target for e in existing}
        self._add_rule_sources(rules)
        for rule in rules.rules:
            if rule.never or rule.kind is None:
                continue
            sources = [s for s, u in self._usages.items()
                       if any(rule.matches(p) for p in u.root_paths)]
            for source in sources:
                instruction = from_user_rule(rule, source)   # not None: no NEVER rule here
                if instruction.kind == "cache" or instruction.target not in have:
                    yield instruction

    def sources_matching(self, pattern: str) -> list[str]:
        """The sources whose root matches ``pattern`` (a root path or a glob): those the
        history read (to be read as it last did), and those of rules that name their format
        and match no source the history read."""
        self._usages.update(_latest_usages(self.records()))
        self._add_rule_sources(self.rules())
        return sorted(s for s, u in self._usages.items()
                      if any(source_matches(pattern, p) for p in u.root_paths))

    def rule_instructions(self, pattern: str) -> list[Instruction]:
        """The user rules' instructions for the sources of :meth:`sources_matching`
        ``pattern`` (called first): every cache instruction, and the indexes not built yet."""
        existing = existing_indexes(self._context.lifecycle().list())
        return [i for i in self._user_instructions(self.rules(), existing)
                if source_matches(pattern, i.source)]

    # --- doing it ---------------------------------------------------------------------------
    def apply(self, instructions: list[Instruction], dry_run: bool = False) -> list[Applied]:
        """Carries out ``instructions`` in order; what each did (see :class:`Applied`)."""
        done = []
        for i in instructions:
            started = time.monotonic()
            if i.action == "skip":
                status, message = "skipped", i.reason
            elif dry_run:
                status, message = "planned", i.reason
            else:
                try:
                    message = self._carry_out(i)
                    status = "applied"
                    if i.origin == "engine" and i.action in ("create", "cache"):
                        self._probation_start(i)
                    elif i.reason.startswith(PROBATION):
                        self._probation_end(i)
                except Exception as exc:  # noqa: BLE001 - the next instructions still run
                    log.warning("rule engine: %s %s on %s failed: %s", i.action, i.kind,
                                i.source, exc)
                    status, message = "failed", f"{type(exc).__name__}: {exc}"
            done.append(Applied(i, status, message, round(time.monotonic() - started, 3)))
        return done

    def source_df(self, source: str) -> DataFrame:
        """A source as the history read it last (or as the rule naming it says)."""
        usage = self._usages.get(source)
        if usage is None:
            self._usages.update(_latest_usages(self.records()))
            usage = self._usages.get(source)
        if usage is None:
            raise ValueError(f"the history has no query over {source}, and no rule says how to "
                             "read it (give format, options and schema in the rule)")
        return read_source(self.spark, usage)

    def _carry_out(self, i: Instruction) -> str:
        return carry_out(i, self._context, self.source_df, self.rules, self._current_demand,
                         self._profiles)


def existing_indexes(entries: list[IndexLogEntry]) -> list[ExistingIndex]:
    """The ACTIVE indexes among ``entries``, one per engine target of their kind (one per
    sketch of a data-skipping index)."""
    out: list[ExistingIndex] = []
    for e in entries:
        if e.state is not IndexState.ACTIVE or kinds.kind_of(e) is None:
            continue
        source = e.source.glob_path or source_key(e.source.root_paths or [])
        origin = str(e.config.get(ORIGIN_KEY) or "user")
        size = int(e.content.get("sizeInBytes") or 0)
        for kind, columns in kinds.kind_of(e).engine_targets(e):
            out.append(ExistingIndex(e.name, kind, source, columns, origin, size))
    return out


def _unused(existing: list[ExistingIndex], entries: list[IndexLogEntry],
            records: list[QueryRecord], rules: RuleSet, now: int) -> list[Instruction]:
    """Drops of the engine's indexes no query used for their TTL (the rules' default TTL, else
    :data:`DEFAULT_INDEX_TTL_S`), counted from their last log entry."""
    ttl = rules.default_ttl_seconds or DEFAULT_INDEX_TTL_S
    used: dict[str, int] = {}
    for r in records:
        for name in r.indexes_applied:
            used[name] = max(used.get(name, 0), r.timestamp)
    changed = {e.name: e.timestamp for e in entries}
    out: dict[str, Instruction] = {}
    for e in existing:
        last = max(used.get(e.name, 0), changed.get(e.name, now))
        if e.origin == "engine" and now - last > ttl * 1000 and e.name not in out:
            out[e.name] = Instruction("drop", e.kind, e.source, e.columns, name=e.name,
                                      origin="engine", reason=f"no query used {e.name} for "
                                      f"{format_duration(ttl)}, its time to live")
    return list(out.values())


def _latest_usages(records: list[QueryRecord]) -> dict[str, RelationUsage]:
    """Per source, how its latest query read it."""
    out: dict[str, tuple[int, RelationUsage]] = {}
    for r in records:
        for u in r.relations:
            if u.source and u.root_paths and (u.source not in out or out[u.source][0] <= r.timestamp):
                out[u.source] = (r.timestamp, u)
    return {s: u for s, (_, u) in out.items()}


def _queries_of(records: list[QueryRecord], source: str) -> int:
    """How many of ``records`` read ``source``."""
    return sum(any(u.source == source for u in r.relations) for r in records)


def error_line(exc: BaseException) -> str:
    """The first line of an error's message (a JVM error's own, not py4j's wrapper)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return (text.strip().splitlines() or [""])[0]


def _ranked_sources(demand: list[Demand], rules: RuleSet) -> list[str]:
    weight: dict[str, float] = {}
    for d in demand:
        if rules.never(d.source) is None:
            weight[d.source] = weight.get(d.source, 0.0) + d.weight
    return sorted(weight, key=lambda s: (-weight[s], s))


def _usage_of_rule(rule: UserRule) -> RelationUsage:
    """How to read a source a rule names but the history has not seen."""
    schema = None
    if rule.schema:
        schema = spark_versions.parse_ddl(rule.schema).json()
    return RelationUsage(source=rule.source, root_paths=[rule.source], format=rule.format or "",
                         options=dict(rule.options), data_schema=schema)
