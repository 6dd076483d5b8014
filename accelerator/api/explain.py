"""``explain`` and ``whyNot``: which indexes a query uses, and why the others are not used."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

from accelerator.cache import serving as cache_serving
from accelerator.query import session
from accelerator.query.rewriter import RewriteResult
from accelerator.runtime import jvm, spark_versions
from accelerator.runtime.settings import CACHE_ENABLED, ENABLED, Settings
from indexes.fs import HadoopFs
from indexes.lifecycle import IndexLifecycle
from indexes.log import IndexState
from indexes.source import source_name

_RULE = "=" * 72


@dataclass(frozen=True)
class WhyNot:
    """Why one index is (not) used for one file source of a query."""

    index: str
    source: str
    code: str
    reason: str

    def __str__(self) -> str:
        return f"{self.index} [{self.code}] {self.source}: {self.reason}"


@contextlib.contextmanager
def _rewrite(spark: Any, enabled: bool) -> Iterator[None]:
    with session.conf_set(spark, {ENABLED: "true" if enabled else "false"}):
        yield


def _execution(spark: Any, df: Any) -> Any:
    """A fresh QueryExecution of ``df``'s analyzed plan (the DataFrame's own caches its plans)."""
    dataset = spark_versions.dataset_class(spark)
    return dataset.ofRows(spark._jsparkSession, df._jdf.queryExecution().analyzed()).queryExecution()


def analyse(spark: Any, df: Any) -> tuple[Any, Any, list[RewriteResult]]:
    """(QueryExecution without indexes, with indexes, the rewrites behind it) for ``df``.

    The plan with indexes goes through the real optimizer rule, so it is exactly what running
    ``df`` with the accelerator enabled does. There is one rewrite per optimized plan: the
    query's own and one for each subquery (optimized first).
    """
    rewriter = session.install(spark)
    with _rewrite(spark, False):
        without = _execution(spark, df)
        without.executedPlan()
    with _rewrite(spark, True), session.capturing(spark), rewriter.capturing() as captured:
        with_indexes = _execution(spark, df)
        with_indexes.executedPlan()
    return without, with_indexes, list(captured)


def _roots(decision: Any) -> str:
    return source_name(decision.description)


def explain(spark: Any, df: Any, verbose: bool = False) -> str:
    """The physical plan with indexes, without, and the indexes used (verbose: all candidates)."""
    without, with_indexes, results = analyse(spark, df)
    lines = [_RULE, "Plan with indexes:", _RULE, with_indexes.executedPlan().toString().rstrip(), "",
             _RULE, "Plan without indexes:", _RULE, without.executedPlan().toString().rstrip(), "",
             _RULE, "Indexes used:", _RULE]
    used = [d.chosen for r in results for d in r.relations if d.chosen is not None]
    lines += [c.explain_line() for c in used] or ["(none)"]
    cached = [(d, d.cache) for r in results for d in r.relations if d.cache is not None]
    if cached:
        lines += ["", _RULE, "Cache:", _RULE]
        lines += [c.explain_line(_roots(d)) for d, c in cached]
    if verbose:
        lines += ["", _RULE, "Candidates:", _RULE]
        for result in results:
            for d in result.relations:
                lines.append(f"source {_roots(d)}:")
                for r in d.results:
                    status = "APPLIED" if r is d.chosen else (
                        "APPLICABLE (another index was chosen)" if r.applicable
                        else f"{r.code}: {r.reason}")
                    lines.append(f"  {r.index.name}: {status}")
                if not d.results:
                    lines.append("  (no index over this source)")
            if result.skipped_reason:
                lines.append(f"rewrite skipped: {result.skipped_reason}")
    return "\n".join(lines)


def _reasons(entry: Any, result: RewriteResult) -> list[WhyNot]:
    """Why ``entry`` is or is not used for each source of one rewritten plan."""
    out = []
    for d in result.relations:
        roots = _roots(d)
        mine = [r for r in d.results if r.index.name == entry.name]
        if result.skipped_reason:
            out.append(WhyNot(entry.name, roots, "PLAN_NOT_SUPPORTED", result.skipped_reason))
        elif not mine:
            out.append(WhyNot(entry.name, roots, "OTHER_SOURCE",
                              "the index is over " + source_name(entry.source)))
        elif mine[0] is d.chosen:
            out.append(WhyNot(entry.name, roots, "APPLIED", d.chosen.applied_reason()))
        elif mine[0].applicable:
            out.append(WhyNot(entry.name, roots, "ANOTHER_INDEX_APPLIED",
                              f"the index '{d.chosen.index.name}' is used instead"))
        else:
            out.append(WhyNot(entry.name, roots, mine[0].code, mine[0].reason))
    return out


#: the name whyNot gives the cache tier's reasons
CACHE = "cache"


def _cache_reasons(result: RewriteResult, every_source: bool, enabled: bool) -> list[WhyNot]:
    """Why the cache serves (or not) each file source of one rewritten plan that has cached
    files (with ``every_source``, each other source too: ``NOT_CACHED``, or ``DISABLED`` when
    ``enabled`` is false): one reason per code, with the number of files."""
    out = []
    for d in result.relations:
        c = d.cache
        if c is None:
            if every_source:
                out.append(WhyNot(CACHE, _roots(d), *(
                    ("NOT_CACHED", "no file of this source is in the cache; hs.cache(df) or a "
                     "cache rule puts them there") if enabled else
                    ("DISABLED", f"the cache serves nothing: {CACHE_ENABLED} is false"))))
            continue
        roots = _roots(d)
        if c.plan is None:
            out.append(WhyNot(CACHE, roots, c.code, c.reason))
            continue
        if c.code == "APPLIED":
            out.append(WhyNot(CACHE, roots, "APPLIED",
                              f"{len(c.plan.served)} files read from the cache"))
        for code, n in sorted(c.plan.reasons.items()):
            out.append(WhyNot(CACHE, roots, code,
                              f"{n} files read from the source: {cache_serving.REASONS[code]}"))
    return out


def why_not(spark: Any, df: Any, index_name: str | None = None) -> list[WhyNot]:
    """For every index (or the named one) and every file source of ``df`` (its subqueries
    included): why it is not used; then, for sources with cached files (unless an index is
    named, or for ``index_name="cache"`` alone), why files are or are not read from the
    cache."""
    settings = Settings.of_session(spark)
    lifecycle = IndexLifecycle(HadoopFs(spark), settings.system_path)
    entries = lifecycle.list()
    if index_name == CACHE:
        entries = []
    elif index_name is not None:
        entries = [lifecycle.get(index_name)]   # raises IndexNotFoundError with the existing names
    _, _, results = analyse(spark, df)
    # an Iceberg table left to Iceberg's own scan is no file source: say why it is left
    unread = None if results else jvm.helpers(spark).plans.fileViewProblem(
        df._jdf.queryExecution().analyzed())
    left = f"the query reads an Iceberg table that is left to Iceberg's scan: {unread}"
    out: list[WhyNot] = []
    for entry in entries:
        if entry.state is not IndexState.ACTIVE:
            out.append(WhyNot(entry.name, "*", "NOT_ACTIVE",
                              f"the index is {entry.state}; only ACTIVE indexes are used"))
        elif unread:
            out.append(WhyNot(entry.name, "*", "TABLE_FORMAT", left))
        elif not results:
            out.append(WhyNot(entry.name, "*", "NO_FILE_SOURCE", "the query reads no files"))
        else:
            for result in results:
                out.extend(_reasons(entry, result))
    if index_name in (None, CACHE):
        for result in results:
            out.extend(_cache_reasons(result, index_name == CACHE, settings.cache_enabled))
    if index_name == CACHE and not results:
        out.append(WhyNot(CACHE, "*", "TABLE_FORMAT", left) if unread
                   else WhyNot(CACHE, "*", "NO_FILE_SOURCE", "the query reads no files"))
    return out


def format_why_not(reasons: list[WhyNot]) -> str:
    """One line per reason, or a note when there is no index at all."""
    return "\n".join(str(r) for r in reasons) if reasons else "no indexes in the system path"



