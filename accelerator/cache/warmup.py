"""Warm-ups: the Spark job that copies the columns a DataFrame reads of the files it reads into
the cache as Parquet, one entry per source file, and the other operations on a DataFrame's
files (uncache, NEVER). The decisions (keys, merging, priorities) are
:mod:`accelerator.cache.model`'s; this module reads and writes.

A warm-up reads the files through the query's own relation (same format, options, schema and
partitioning, so the copy holds exactly what Spark would read), tags each row with its file's
tag (the pack's random number and a hash of the file's name, see
:mod:`accelerator.cache.serving`) and writes a pack in one job, its files packed into tasks by
their bytes alone (no open cost per file: one task per ``maxPartitionBytes`` of source, at least
one per core): each task one Parquet file of the rows
it read (one per partition it read, under the partition's folder, sorted by tag), each file's
rows together in the order read. So many small files make few cache files.
Which pack files hold which file's rows (Spark may split a file between tasks) the driver knows
without any work per row: the job writes the rows of one RDD, whose partitions name the file
splits each task reads (``CacheServing.partitionFiles``), each task writing one file named by
its number; for a partitioned source (a task writes one file per partition), or files not named
so, a second small job reads the pack's tags back. The new entries are committed after the jobs,
in one batch file (:mod:`accelerator.cache.batches`); a crash before the commit leaves only
files that no entry names, which the demoter deletes after the grace period.

Under the scheduler's FAIR pool (:data:`accelerator.runtime.settings.JOBS_POOL`, the local property
``spark.scheduler.pool``), a warm-up runs in the background of interactive queries, which Spark
cannot give a core that a warm-up task holds (no preemption). There it leaves them a core: the
files are written in several jobs, one after the other, each over at most
:data:`POOL_TASK_BYTES` of source files per task and coalesced to all cores but one (at least
one task); what each job writes, and the entries, are the same as in one job.
"""
from __future__ import annotations

import json
import re
import secrets
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple

from pyspark.sql import DataFrame, functions as F

from accelerator.cache.model import (CacheCapacityError, CacheEntry, CacheKey, Priority,
                                     parse_duration, parse_priority, plan_warmup)
from accelerator.cache.policy import check_always_fits
from accelerator.cache.serving import FILE_SELECTING_OPTIONS, PACK_SHIFT
from accelerator.cache.tier import CacheTier
from accelerator.query import session
from accelerator.runtime import build_progress, jvm, spark_versions
from accelerator.runtime.settings import CACHE_ENABLED, ENABLED, JOBS_POOL, POOL_PROPERTY, Settings
from indexes.description import SourceDescription
from indexes.errors import CacheRequestError
from indexes.fs import in_parallel
from indexes.kind import size_text

FILE_ID = "__accelerator_file"
_ROW = "__accelerator_row"
#: Spark types Parquet cannot hold
_UNSUPPORTED_TYPES = ("interval", "void", "calendarinterval")
#: what the warm-up job writes with, whatever the session says (readable by any reader)
_WRITE_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
               "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
               "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
               "spark.sql.files.maxRecordsPerFile": "0"}
#: what the warm-up job reads with: no cost counted per file opened, so Spark packs the files
#: into tasks by their bytes alone (at most ``maxPartitionBytes`` each, and at least one task
#: per core): many small files make few tasks, each writing one cache file, and the tasks stay
#: of one size (coalescing Spark's tasks instead joins whole tasks: 8 into 6 left two cores
#: with 5 and 3 tasks' work)
_READ_CONF = {"spark.sql.files.openCostInBytes": "0"}
#: under the scheduler's pool: the bytes of source files one task of a warm-up job reads (a
#: file larger than that is read by one task of a job of its own)
POOL_TASK_BYTES = 64 * 1024 * 1024


class ScanFile(NamedTuple):
    """A file a scan reads: a :class:`~indexes.description.SourceFile`'s path, size and
    modification time, and the name ``input_file_name()`` gives its rows."""

    path: str
    size: int
    mtime: int
    name: str


@dataclass(frozen=True)
class Scan:
    """One file scan of a query: the JVM scan, the description of its relation, the data
    columns it reads (``required``) and the files it reads (after partition pruning)."""

    jscan: Any
    description: SourceDescription
    required: tuple[str, ...]
    files: tuple[ScanFile, ...]

    @staticmethod
    def of(jscan: Any, described: str) -> "Scan":
        """The scan ``jscan`` as ``CacheServing.describeScan`` describes it (JSON)."""
        data = json.loads(described)
        required, files = data.pop("required"), data.pop("files")
        return Scan(jscan, SourceDescription.from_json(data), tuple(required),
                    tuple(ScanFile(*f) for f in files))

    @property
    def roots(self) -> list[str]:
        return self.description.root_paths


@dataclass(frozen=True)
class WarmupResult:
    """The summary row of ``hs.cache``."""

    files: int
    bytes_read: int
    bytes_written: int
    seconds: float


def scans(spark: Any, df: DataFrame, system_path: str) -> list[Scan]:
    """The file scans ``df`` runs, after partition pruning and any data-skipping index (the
    cache itself left out; ``system_path`` qualified). A scan of an index's data stands for its
    source, so when an index replaces a relation the scans are those of the plan without
    indexes. Bucketed relations are left out (the cache does not serve them)."""
    helpers = jvm.helpers(spark)
    # an Iceberg table as the Parquet files of its snapshot, which the cache copies
    analyzed = helpers.plans.fileView(df._jdf.queryExecution().analyzed())
    dataset = spark_versions.dataset_class(spark)

    def run(rewrite: bool) -> list[Scan]:
        with session.conf_set(spark, {ENABLED: str(rewrite).lower(), CACHE_ENABLED: "false"}):
            qe = dataset.ofRows(spark._jsparkSession, analyzed).queryExecution()
            return [Scan.of(s, helpers.cache.describeScan(s))
                    for s in helpers.cache.scans(qe.sparkPlan())]

    session.install(spark)
    found = run(True)
    own = system_path.rstrip("/") + "/"
    if any(r.startswith(own) for s in found for r in s.roots):
        found = run(False)
    return [s for s in found if not s.description.bucketed]


def _check_source(scan: Scan, columns: Iterable[str]) -> None:
    """Refuses what the cache cannot copy faithfully (a clear error naming the source)."""
    d = scan.description
    roots = ", ".join(scan.roots)
    if d.plain_files:
        raise CacheRequestError(
            f"cannot cache {roots}: {d.plain_files}, which only the {d.table_format} table's "
            "own scan applies (copies of its files would lose it); index it instead")
    options = {k.lower(): v for k, v in (d.options or {}).items()}
    mode = options.get("mode", "PERMISSIVE").upper()
    if d.format in ("csv", "json") and mode != "PERMISSIVE":
        raise CacheRequestError(
            f"cannot cache {roots}: it is read with mode={mode}, which drops or fails on "
            "malformed rows depending on the columns read; only mode=PERMISSIVE sources can be "
            "cached")
    corrupt = options.get("columnnameofcorruptrecord", "_corrupt_record")
    fields = {f["name"]: f for f in json.loads(d.data_schema)["fields"]}
    if d.format in ("csv", "json") and corrupt in fields:
        raise CacheRequestError(
            f"cannot cache {roots}: its schema holds the corrupt-record column '{corrupt}', "
            "whose values depend on the columns read")
    for name in columns:
        kind = json.dumps(fields[name]["type"]).lower()
        if any(t in kind for t in _UNSUPPORTED_TYPES):
            raise CacheRequestError(
                f"cannot cache column '{name}' of {roots}: Parquet cannot hold its type "
                f"{fields[name]['type']}")


def cached_columns(scan: Scan, columns: list[str] | None, case_sensitive: bool) -> list[str]:
    """The top-level data columns to cache: ``columns`` (nested fields name their top-level
    column) or those the scan reads; CacheRequestError for a column the source lacks."""
    data = [f["name"] for f in json.loads(scan.description.data_schema)["fields"]]
    if columns is None:
        wanted = list(scan.required) or data[:1]
    else:
        lookup = {(n if case_sensitive else n.lower()): n for n in data}
        wanted = []
        for c in columns:
            top = c.split(".", 1)[0]
            found = lookup.get(top if case_sensitive else top.lower())
            if found is None:
                parts = scan.description.partition_columns
                where = " (a partition column: its values are kept with every entry)" \
                    if top in parts else ""
                raise CacheRequestError(
                    f"cannot cache column '{c}' of {', '.join(scan.roots)}: no such data "
                    f"column{where}; its data columns are {data}")
            wanted.append(found)
    return sorted(set(wanted))


def file_key(scan: Scan, f: ScanFile, read_settings: dict) -> CacheKey:
    d = scan.description
    options = {k: v for k, v in (d.options or {}).items()
               if k.lower() not in FILE_SELECTING_OPTIONS}
    return CacheKey.create(f.path, int(f.size), int(f.mtime), d.format, options, d.data_schema,
                           read_settings)


def source_roots(scan: Scan) -> Callable[[str], str]:
    """The root of ``scan`` each of its files comes from: the file itself when it is a root,
    else its nearest ancestor that is one, else the first root. Constant time per file however
    many roots there are (a read of thousands of files names each one as a root)."""
    roots: dict[str, str] = {}
    for r in scan.roots:
        roots.setdefault(r.rstrip("/"), r)

    def root_of(path: str) -> str:
        while path:
            if path in roots:
                return roots[path]
            path = path.rpartition("/")[0]
        return scan.roots[0]

    return root_of


def _unique_id_groups(names: list[str]) -> list[list[int]]:
    """Indexes of ``names`` in groups whose crc32 hashes differ (what the job tags rows with)."""
    groups: list[tuple[set[int], list[int]]] = []
    for i, name in enumerate(names):
        h = zlib.crc32(name.encode("utf-8"))
        for seen, members in groups:
            if h not in seen:
                seen.add(h)
                members.append(i)
                break
        else:
            groups.append(({h}, [i]))
    return [members for _, members in groups]


def background_slots(spark: Any) -> int | None:
    """Under the scheduler's pool: the tasks a warm-up job runs at once, all cores but one (at
    least one); None otherwise (one job over all the files, as many tasks as Spark makes)."""
    sc = spark.sparkContext
    if sc.getLocalProperty(POOL_PROPERTY) != JOBS_POOL:
        return None
    return max(1, sc.defaultParallelism - 1)


def chunks(group: list[int], sizes: list[int], limit: int) -> list[list[int]]:
    """``group`` cut, in order, into runs whose ``sizes`` sum to at most ``limit`` (a larger
    item alone)."""
    out: list[list[int]] = []
    total = limit + 1
    for i, size in zip(group, sizes):
        if total + size > limit:
            out.append([])
            total = 0
        out[-1].append(i)
        total += size
    return out


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Packed:
    """Where a warm-up wrote one source file's rows: its pack's folder, its rows' tag, the pack
    files holding them (path, size), its share of their bytes and how many source files the
    pack holds (None when rows carry a tag none of them was given)."""

    folder: str
    tag: int
    files: tuple[tuple[str, int], ...]
    bytes: int
    pack_files: int | None


def _pack_number() -> int:
    """A fresh pack number: random, positive, below 2**31 (see :mod:`accelerator.cache.serving`
    for why a clash of two is harmless)."""
    return secrets.randbelow((1 << 31) - 1) + 1


def _written(tier: CacheTier, target: str) -> dict[str, int]:
    """The Parquet files of the pack under ``target`` (its partition folders too), by size."""
    written: dict[str, int] = {}
    folders = [target]
    while folders:   # the pack's folder and its partition folders
        listed = [f for found in tier.fs.list_each(folders) for f in found]
        written.update((f.path, f.size) for f in listed
                       if not f.is_dir and not f.name.startswith((".", "_")))
        folders = [f.path for f in listed if f.is_dir]
    return written


def _members(spark: Any, target: str, written: dict[str, int]
             ) -> dict[int, list[tuple[str, int, int]]]:
    """Per tag, the pack files under ``target`` holding rows of it: (path, size, rows), read
    back from the pack's hidden column (one small job over that column alone; a source file's
    rows may be split between tasks, and a task's file holds the rows of all its files)."""
    if not written:
        return {}
    jvm_path, uri = spark._jvm.org.apache.hadoop.fs.Path, spark._jvm.java.net.URI
    counts = spark.read.option("recursiveFileLookup", "true").parquet(target) \
        .groupBy(F.input_file_name().alias("f"), F.col(FILE_ID)).count().collect()
    paths = {name: jvm_path(uri(name)).toString() for name in {r["f"] for r in counts}}
    out: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for r in counts:
        path = paths[r["f"]]
        out[int(r[FILE_ID])].append((path, int(written[path]), int(r["count"])))
    return out


_TASK_FILE = re.compile(r"part-(\d+)-")


def _task_members(layout: list[list[str]], number: int, sizes: dict[int, int],
                  written: dict[str, int]) -> dict[int, list[tuple[str, int, int]]] | None:
    """Per tag, the pack files that may hold rows of it, from the files each task of an
    unpartitioned pack read (``layout``: by task, the names of its files, see
    ``CacheServing.partitionFiles``; task ``n`` wrote the one file ``part-<n>-...``), each
    weighed by its source file's size (``sizes``, by the low half of its tag) instead of its
    rows; None when the files are not one per task as named or a name is not one the pack was
    asked to copy (read the tags back then)."""
    by_task: dict[int, list[str]] = defaultdict(list)
    for path in written:
        m = _TASK_FILE.match(path.rpartition("/")[2])
        if m is None:
            return None
        by_task[int(m.group(1))].append(path)
    out: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for task, read in enumerate(layout):
        for name in read:
            low = zlib.crc32(name.encode("utf-8"))
            found = by_task.get(task, [])
            if low not in sizes or len(found) != 1:
                return None
            out[(number << PACK_SHIFT) + low].append(
                (found[0], int(written[found[0]]), max(1, sizes[low])))
    return out


def _write(spark: Any, tier: CacheTier, scan: Scan, files: list[ScanFile],
           columns: list[str]) -> tuple[str, dict[str, Packed]]:
    """Copies ``columns`` of ``files`` into packs in one job (several under the scheduler's
    pool: see the module docstring); returns the batch's directory and, per source path, where
    its rows went."""
    helpers = jvm.helpers(spark)
    paths = [f.path for f in files]
    names = [f.name for f in files]
    partitions = list(scan.description.partition_columns or [])
    batch = tier.manifest.new_data_path()
    out: dict[str, Packed] = {}
    groups = _unique_id_groups(names)
    slots = background_slots(spark)
    if slots is not None:
        groups = [chunk for group in groups for chunk in
                  chunks(group, [int(files[i].size) for i in group], slots * POOL_TASK_BYTES)]
    for n, group in enumerate(groups):
        target = f"{batch}/{n}"
        number = _pack_number()
        source = DataFrame(helpers.cache.read(scan.jscan, "\n".join(paths[i] for i in group)),
                           spark)
        if slots is not None:
            source = source.coalesce(slots)
        tagged = source.select(
            *[F.col(_quoted(c)) for c in [*columns, *partitions]],
            (F.lit(number << PACK_SHIFT)
             + F.crc32(F.input_file_name().cast("binary"))).alias(FILE_ID))
        layout = None
        with session.suspended(spark), session.conf_set(spark, {**_READ_CONF, **_WRITE_CONF}):
            if partitions:   # a pack file holds rows of one partition (listed under its values)
                writer = tagged.withColumn(_ROW, F.monotonically_increasing_id()) \
                    .sortWithinPartitions(*[_quoted(p) for p in partitions], FILE_ID, _ROW) \
                    .drop(_ROW).write.partitionBy(*partitions)
            else:   # a task reads file after file: each file's rows are together, in read
                # order; the job writes the rows of one RDD, whose partitions name their files
                rows = tagged._jdf.queryExecution().toRdd()
                layout = helpers.cache.partitionFiles(rows)
                writer = DataFrame(spark._jsparkSession.internalCreateDataFrame(
                    rows, tagged._jdf.schema(), False), spark).write
            writer.mode("errorifexists").parquet(target)
            written = _written(tier, target)
            members = None
            if layout is not None:
                tags = {zlib.crc32(names[i].encode("utf-8")): int(files[i].size) for i in group}
                members = _task_members(json.loads(layout), number, tags, written)
            if members is None:
                members = _members(spark, target, written)
        rows_in: dict[str, int] = defaultdict(int)
        for held in members.values():
            for path, _, rows in held:
                rows_in[path] += rows
        given = {(number << PACK_SHIFT) + zlib.crc32(names[i].encode("utf-8")): i for i in group}
        whole = len(group) if set(members) <= set(given) else None
        for tag, i in given.items():
            held = members.get(tag, [])
            share = sum(size * rows // rows_in[path] for path, size, rows in held)
            out[paths[i]] = Packed(target, tag, tuple(sorted((p, b) for p, b, _ in held)), share,
                                   whole)
    return batch, out


def warm(spark: Any, tier: CacheTier, settings: Settings, df: DataFrame,
         columns: list[str] | None, priority: str, ttl: str | None) -> WarmupResult:
    """``hs.cache``: warms the files ``df`` reads (see the module docstring)."""
    started = time.monotonic()
    level = parse_priority(priority, allow_never=True)
    if level is Priority.NEVER:
        for s in scans(spark, df, tier.fs.qualify(settings.system_path)):
            for root in s.roots:
                tier.never.set(root, reason="hs.cache(priority='NEVER')")
        tier.refresh()
        return WarmupResult(0, 0, 0, time.monotonic() - started)
    ttl_seconds = parse_duration(ttl) if ttl is not None else None
    read_settings = json.loads(jvm.helpers(spark).plans.currentReadSettings(spark._jsparkSession))
    found = scans(spark, df, tier.fs.qualify(settings.system_path))
    markers = tier.never.list()
    read = tier.manifest.read()
    known = read.entries()   # EVICTED ones too: a key seen in any state is merged, not batched
    entries = defaultdict(list)
    for e in known:
        entries[e.file_path].append(e)
    jobs: list[tuple[Scan, list[str], list[tuple[ScanFile, CacheKey, Any]]]] = []
    for s in found:
        wanted = cached_columns(s, columns, settings.case_sensitive)
        _check_source(s, wanted)
        for m in markers:
            for path in [*s.roots, *(f.path for f in s.files)]:
                if path.rstrip("/") == m.root or path.startswith(m.root + "/"):
                    tier.never.check(path)   # raises, naming the marker
        todo, raised = [], []
        for f in s.files:
            key = file_key(s, f, read_settings)
            plan = plan_warmup(key, wanted, level, ttl_seconds, entries[f.path])
            if plan.write:
                todo.append((f, key, plan))
            elif (plan.priority, plan.ttl_seconds) != (plan.keep.priority, plan.keep.ttl_seconds):
                raised.append((key.hex, plan))
        in_parallel(lambda r: tier.manifest.raise_terms(r[0], r[1].priority, r[1].ttl_seconds,
                                                        read), raised)
        jobs.append((s, wanted, todo))
    files = sum(len(s.files) for s in found)
    read = written = always = 0
    max_bytes = tier.max_bytes(settings.cache_max_bytes)
    todo_files = [f for _, _, todo in jobs for f, _, _ in todo]
    what = (f"cache warm-up of {len(todo_files)} files of "
            f"{', '.join(sorted({r for s, _, _ in jobs for r in s.roots}))} "
            f"({size_text(sum(int(f.size) for f in todo_files))})")
    with build_progress.building(spark, what):
        for s, wanted, todo in jobs:
            root_of = source_roots(s)
            by_columns: dict[tuple[str, ...], list] = defaultdict(list)
            for item in todo:
                by_columns[item[2].columns].append(item)
            for cols, items in by_columns.items():
                batch, written_files = _write(spark, tier, s, [f for f, _, _ in items], list(cols))
                now = tier.manifest.now()
                new = []
                for f, key, plan in items:
                    packed = written_files[f.path]
                    new.append((CacheEntry(
                        key=key.hex, source_root=root_of(f.path), file_path=f.path,
                        file_size=int(f.size), file_mtime=int(f.mtime), columns=cols,
                        priority=plan.priority, ttl_seconds=plan.ttl_seconds,
                        bytes=packed.bytes, data_path=packed.folder, created=now,
                        last_used=now, read_key=key.read_key, files=packed.files,
                        tag=packed.tag, pack_files=packed.pack_files), plan))
                always += sum(e.bytes for e, p in new if p.priority is Priority.ALWAYS)
                try:   # against the entries read at the start (a concurrent warm-up may add more)
                    check_always_fits(known, always, max_bytes)
                except CacheCapacityError:
                    tier.fs.delete(batch, recursive=True)
                    raise
                seen = {e.key for e in known}
                tier.manifest.commit_all([(entry, plan.supersedes) for entry, plan in new],
                                         frozenset(e.key for e, _ in new if e.key not in seen))
                read += sum(int(f.size) for f, _, _ in items)
                written += sum(e.bytes for e, _ in new)
    tier.demote(settings)
    return WarmupResult(files, read, written, time.monotonic() - started)


def uncache(spark: Any, tier: CacheTier, settings: Settings, df: DataFrame) -> tuple[int, int]:
    """``hs.uncache``: evicts the entries of the files ``df`` reads (however they were read)
    and lifts NEVER markers of its sources; returns (entries evicted, their bytes)."""
    found = scans(spark, df, tier.fs.qualify(settings.system_path))
    paths = {f.path for s in found for f in s.files}
    evicted = tier.manifest.evict([e for e in tier.manifest.entries() if e.file_path in paths])
    for s in found:
        for root in s.roots:
            tier.never.lift(root)
    tier.refresh()
    return len(evicted), sum(e.bytes for e in evicted)
