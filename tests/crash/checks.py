"""What must hold after a driver process was killed in an operation, checked from another
process (the test's SparkSession) with the accelerator enabled:

1. every index is in a stable state or a transient one (never CORRUPT), and every query gives
   vanilla Spark's rows, reading only source files, the files the latest stable log entry of
   an index names, or the files of an ACTIVE cache entry;
2. ``cancel`` rolls a transient index back to its last stable state (DOESNOTEXIST after a
   create or a vacuum), and the queries still hold;
3. the operation done again works, and the index or cache answers its query;
4. vacuuming outdated data (retention 0) and the demoter (grace 0) leave no data that neither
   a log entry nor a cache entry names, and the queries hold again.
"""
from __future__ import annotations

from typing import Any

from accelerator import Hyperspace
from accelerator.cache.tier import tier_for
from accelerator.query.catalog import catalog
from accelerator.runtime.settings import Settings
from indexes import kinds
from indexes.fs import HadoopFs
from indexes.lifecycle import IndexLifecycle
from indexes.log import IndexState
from tests.crash.scenarios import COVERING, QUERIES, Scenario, source, source_files
from tests.helpers import rows, session_conf, vanilla

#: what a system path may hold besides index directories
SYSTEM_DIRS = {"_events", "_cache", "_history", "_trash"}


def _uri(path: str) -> str:
    """``path`` in the one form HadoopFs gives (Spark's ``inputFiles`` writes ``file:///``)."""
    return "file:/" + path[len("file:///"):] if path.startswith("file:///") else path


def _fresh(spark: Any) -> Any:
    """Forgets what this process cached of the indexes and the cache manifest (another process
    changed them); the cache tier."""
    catalog(spark).invalidate()
    tier = tier_for(HadoopFs(spark), Settings.of_session(spark).cache_path)
    tier.reload()
    return tier


def readable_files(spark: Any, ctx: dict) -> set[str]:
    """The files a query may read: the source's, those the latest stable entry of each ACTIVE
    index names, those of ACTIVE cache entries."""
    fs = HadoopFs(spark)
    allowed = set(source_files(spark, ctx))
    lifecycle = IndexLifecycle(fs, ctx["system_path"])
    for entry in lifecycle.list():
        stable = lifecycle.log_manager(entry.name).latest_stable()
        if stable is not None and stable.state is IndexState.ACTIVE:
            root = stable.content["path"].rstrip("/").rsplit("/", 1)[0]
            allowed |= {f"{root}/{f[0]}" for f in stable.content.get("files") or []}
    tier = tier_for(fs, Settings.of_session(spark).cache_path)
    allowed |= {path for e in tier.manifest.entries() for path, _ in e.files}
    return allowed


def expected_rows(spark: Any, ctx: dict) -> dict[str, list]:
    """Vanilla Spark's rows of each query of :data:`~tests.crash.scenarios.QUERIES` (the
    source does not change after the set-up, so once per point)."""
    return {kind: vanilla(spark, lambda q=query: q(source(spark, ctx)))
            for kind, query in QUERIES.items()}


def check_queries(spark: Any, ctx: dict, expected: dict[str, list], when: str) -> None:
    """Every query of :data:`~tests.crash.scenarios.QUERIES` gives the ``expected`` (vanilla)
    rows and reads only :func:`readable_files`."""
    _fresh(spark)
    allowed = readable_files(spark, ctx)
    for kind, query in QUERIES.items():
        assert rows(query(source(spark, ctx))) == expected[kind], \
            f"{when}: the {kind} query differs from vanilla Spark"
        stray = {_uri(f) for f in query(source(spark, ctx)).inputFiles()} - allowed
        assert not stray, f"{when}: the {kind} query read files nothing names: {sorted(stray)}"


def check_states(spark: Any, ctx: dict, scenario: Scenario) -> dict[str, IndexState]:
    """The latest state of each index of the scenario (absent: never written or removed);
    none CORRUPT."""
    lifecycle = IndexLifecycle(HadoopFs(spark), ctx["system_path"])
    states = {}
    for name in scenario.indexes:
        latest = lifecycle.log_manager(name).latest()
        if latest is not None:
            assert latest.state is not IndexState.CORRUPT, latest.properties
            states[name] = latest.state
    return states


def cancel_transient(spark: Any, hs: Hyperspace, ctx: dict, scenario: Scenario) -> list[str]:
    """Cancels each index left in a transient state and checks it is back in its last stable
    state (DOESNOTEXIST, its directory gone, when none or a vacuum had begun); the indexes
    cancelled."""
    lifecycle = IndexLifecycle(HadoopFs(spark), ctx["system_path"])
    cancelled = []
    for name, state in check_states(spark, ctx, scenario).items():
        if state.is_stable:
            continue
        log = lifecycle.log_manager(name)
        stable = log.latest_stable()
        begun = [log.get(i) for i in log.ids() if stable is None or i > stable.id]
        gone = stable is None or stable.state is IndexState.DOESNOTEXIST \
            or any(e is not None and e.state is IndexState.VACUUMING for e in begun)
        hs.cancel(name)
        after = log.latest()
        if gone:
            assert after is None, f"cancel left index '{name}' {after.state}, not removed"
        else:
            assert after is not None and after.state is stable.state \
                and after.content == stable.content, \
                f"cancel of '{name}' did not restore entry {stable.id}: {after}"
        cancelled.append(name)
    return cancelled


def check_served(spark: Any, ctx: dict, scenario: Scenario) -> None:
    """After the operation was redone, its index (or the cache) answers its query."""
    _fresh(spark)
    n_source = len(source_files(spark, ctx))
    if not scenario.indexes:
        cache = HadoopFs(spark).qualify(Settings.of_session(spark).cache_path).rstrip("/")
        files = [_uri(f) for f in QUERIES[COVERING](source(spark, ctx)).inputFiles()]
        assert files and all(f.startswith(cache + "/") for f in files), f"not cached: {files}"
        return
    for name in scenario.indexes:
        files = QUERIES[name](source(spark, ctx)).inputFiles()
        if name == COVERING:
            assert any(f"/{name}/v__=" in f for f in files), f"'{name}' not used: {files}"
        else:
            assert len(files) < n_source, f"'{name}' skipped no file: {files}"


def _files_under(fs: HadoopFs, path: str) -> list[str]:
    """The files below ``path`` but checksums and Spark's ``_SUCCESS`` markers (a killed
    job's ``_temporary`` files included)."""
    out = []
    for info in fs.list(path):
        if info.name.startswith(".") or info.name == "_SUCCESS":
            continue
        out.extend(_files_under(fs, info.path) if info.is_dir else [info.path])
    return out


def check_no_orphans(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    """Vacuums outdated data of every ACTIVE index and runs the demoter, both keeping nothing
    for later; then the system path holds only the data directories the indexes' latest
    entries read and the cache only the files of its ACTIVE entries."""
    fs = HadoopFs(spark)
    lifecycle = IndexLifecycle(fs, ctx["system_path"])
    for entry in lifecycle.list():
        if entry.state is IndexState.ACTIVE:
            hs.vacuumIndex(entry.name, retentionSeconds=0)
    with session_conf(spark, spark__accelerator__cache__deleteGraceSeconds="0"):
        hs.evictCache()
    live = {e.name.lower(): e for e in lifecycle.list()}
    for info in fs.list(ctx["system_path"]):
        if info.name == "_trash":
            assert not fs.list(info.path), f"left in the trash: {fs.list(info.path)}"
        elif info.name not in SYSTEM_DIRS and not info.name.startswith("."):
            assert info.name in live, f"{info.path} is left of an index that does not exist"
            entry = live[info.name]
            read = {fs.qualify(d).rstrip("/") for d in kinds.kind_of(entry).data_dirs(entry)}
            stray = {i.path for i in fs.list(info.path)
                     if i.name != "_log" and not i.name.startswith(".")} - read
            assert not stray, f"data no log entry of '{entry.name}' reads: {sorted(stray)}"
    tier = _fresh(spark)
    named = {path for e in tier.manifest.entries() for path, _ in e.files}
    stray = set(_files_under(fs, f"{tier.path}/data")) - named
    assert not stray, f"cache data no entry names: {sorted(stray)}"


def check_after_crash(spark: Any, hs: Hyperspace, ctx: dict, scenario: Scenario) -> list[str]:
    """Every check of the module docstring, in order; the indexes that needed a cancel."""
    check_states(spark, ctx, scenario)
    expected = expected_rows(spark, ctx)
    check_queries(spark, ctx, expected, "after the crash")
    cancelled = cancel_transient(spark, hs, ctx, scenario)
    if cancelled:
        check_queries(spark, ctx, expected, "after cancel")
    scenario.redo(spark, hs, ctx)
    check_served(spark, ctx, scenario)
    check_no_orphans(spark, hs, ctx)
    check_queries(spark, ctx, expected, "after the operation was redone, vacuum and the demoter")
    return cancelled
