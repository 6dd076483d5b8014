"""The operations crash tests kill, each with its set-up, its queries and what redoing it means.

A scenario works in one directory (``ctx["root"]``, any Hadoop file system): a small Parquet
source at ``ctx["src"]`` and a system path at ``ctx["system_path"]``. ``setup`` runs in the
test process; ``operation`` is what the driver process runs and is killed in (and what the
counting run runs uninterrupted); ``redo`` runs the operation again after the crash was
cleaned up, to show the index or the cache works as before. Every scenario checks the same
queries, one per index kind, so a half-applied operation of any kind would show.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from accelerator import (BloomFilterSketch, DataSkippingIndexConfig, Hyperspace, IndexConfig,
                         MinMaxSketch, TextIndexConfig, ValueListSketch)
from accelerator.query.session import conf_set
from indexes.errors import IndexNotFoundError
from indexes.fs import HadoopFs

COVERING, SKIPPING, TEXT = "ix", "ds", "tx"
LINEAGE = {"spark.accelerator.index.lineage.enabled": "true"}
#: every query of every scenario, by what may answer it: the covering index, data skipping
#: on ``id`` and ``k``, the text index
QUERIES = {
    COVERING: lambda df: df.filter("k = 3").select("id", "name"),
    SKIPPING: lambda df: df.filter("id BETWEEN 1500 AND 1900 AND k = 5").select("id", "k"),
    TEXT: lambda df: df.filter("msg LIKE '%req 2345%'").select("id", "msg"),
}


def write_source(spark: Any, path: str, start: int, end: int, files: int) -> None:
    """Appends rows ``start..end`` to the Parquet source at ``path``, as ``files`` files of
    consecutive ids (so min/max statistics of ``id`` tell the files apart)."""
    (spark.range(start, end, numPartitions=files)
     .selectExpr("id", "CAST(id % 13 AS INT) AS k", "concat('n', id % 97) AS name",
                 "concat('code E', id % 50, ' at host-', id % 7, ' req ', id) AS msg")
     .write.mode("append").parquet(path))


def source(spark: Any, ctx: dict) -> Any:
    """The scenario's source DataFrame."""
    return spark.read.parquet(ctx["src"])


def source_files(spark: Any, ctx: dict) -> list[str]:
    """The source's data files, qualified, by name."""
    return sorted(f.path for f in HadoopFs(spark).list(ctx["src"])
                  if not f.is_dir and f.name.endswith(".parquet"))


def change_source(spark: Any, ctx: dict) -> None:
    """Appends two files to the source and deletes its first one (each a sixth of the rows:
    within the limits of hybrid scan)."""
    first = source_files(spark, ctx)[0]
    write_source(spark, ctx["src"], 6000, 7000, 2)
    HadoopFs(spark).delete(first, recursive=False)


def create(spark: Any, hs: Hyperspace, ctx: dict, name: str) -> None:
    """Creates the index ``name`` (one of :data:`COVERING`, :data:`SKIPPING`, :data:`TEXT`)
    over the source; covering indexes with the lineage column."""
    df = source(spark, ctx)
    if name == COVERING:
        with conf_set(spark, LINEAGE):
            hs.createIndex(df, IndexConfig(COVERING, ["k"], ["id", "name"], numBuckets=4))
    elif name == SKIPPING:
        hs.createIndex(df, DataSkippingIndexConfig(
            SKIPPING, MinMaxSketch("id"), ValueListSketch("k"),
            BloomFilterSketch("name", fpp=0.05, expectedDistinctCountPerFile=200)))
    else:
        hs.createIndex(df, TextIndexConfig(TEXT, column="msg"))


def exists(hs: Hyperspace, name: str) -> bool:
    """Whether the index ``name`` exists (any state)."""
    try:
        hs.index(name)
    except IndexNotFoundError:
        return False
    return True


@dataclass(frozen=True)
class Scenario:
    """One operation to kill: ``indexes`` names those it works on (none: the cache)."""

    name: str
    setup: Callable[[Any, Hyperspace, dict], None]
    operation: Callable[[Any, Hyperspace, dict], None]
    redo: Callable[[Any, Hyperspace, dict], None]
    indexes: tuple[str, ...]
    ci: bool = True


def _source(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    write_source(spark, ctx["src"], 0, 6000, 6)


def _create(name: str) -> Scenario:
    def again(spark: Any, hs: Hyperspace, ctx: dict) -> None:
        if not exists(hs, name):
            create(spark, hs, ctx, name)
    return Scenario(f"create-{name}", _source,
                    lambda spark, hs, ctx: create(spark, hs, ctx, name), again, (name,))


def _refresh(name: str, mode: str, ci: bool = True) -> Scenario:
    def setup(spark: Any, hs: Hyperspace, ctx: dict) -> None:
        _source(spark, hs, ctx)
        create(spark, hs, ctx, name)
        change_source(spark, ctx)

    def refresh(spark: Any, hs: Hyperspace, ctx: dict) -> None:
        hs.refreshIndex(name, mode)
    return Scenario(f"refresh-{mode}-{name}", setup, refresh, refresh, (name,), ci)


def _optimize_setup(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    _source(spark, hs, ctx)
    create(spark, hs, ctx, COVERING)
    write_source(spark, ctx["src"], 6000, 7000, 2)
    hs.refreshIndex(COVERING, "incremental")   # delta files for optimize to fold in


def _optimize(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    hs.optimizeIndex(COVERING, "full")


def _deleted_setup(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    _source(spark, hs, ctx)
    create(spark, hs, ctx, COVERING)
    hs.deleteIndex(COVERING)


def _vacuum(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    hs.vacuumIndex(COVERING)


def _vacuum_redo(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    if exists(hs, COVERING):
        hs.vacuumIndex(COVERING)
    create(spark, hs, ctx, COVERING)   # the name is free again


def _outdated_setup(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    _source(spark, hs, ctx)
    create(spark, hs, ctx, COVERING)
    change_source(spark, ctx)
    hs.refreshIndex(COVERING, "full")


def _vacuum_outdated(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    hs.vacuumIndex(COVERING, retentionSeconds=0)


def _cache_setup(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    _source(spark, hs, ctx)
    hs.cache(source(spark, ctx).select("id", "k"))


def _cache(spark: Any, hs: Hyperspace, ctx: dict) -> None:
    hs.cache(source(spark, ctx))   # every column: one entry per file replaces the narrower one


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    _create(COVERING),
    _create(SKIPPING),
    _create(TEXT),
    _refresh(COVERING, "full"),
    _refresh(COVERING, "incremental"),
    _refresh(COVERING, "quick"),
    Scenario("optimize-ix", _optimize_setup, _optimize, _optimize, (COVERING,)),
    Scenario("vacuum-ix", _deleted_setup, _vacuum, _vacuum_redo, (COVERING,)),
    Scenario("vacuum-outdated-ix", _outdated_setup, _vacuum_outdated, _vacuum_outdated,
             (COVERING,)),
    Scenario("cache", _cache_setup, _cache, _cache, ()),
    _refresh(SKIPPING, "incremental", ci=False),
    _refresh(SKIPPING, "full", ci=False),
    _refresh(TEXT, "incremental", ci=False),
    _refresh(TEXT, "full", ci=False),
]}
