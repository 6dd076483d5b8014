"""Building a data-skipping index: resolve the sketches against the source, then compute the
statistics of every file, from Parquet footers where they can be trusted
(:mod:`indexes.skipping.footers`) and otherwise with one Spark job over only the sketched
expressions, grouped by file."""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Sequence

from pyspark.sql import DataFrame, functions as F

from indexes.errors import InvalidIndexConfigError
from indexes.plan import chain, output_attributes, parse_plan
from indexes.schema_paths import PLAIN_PATH, check_column_path
from indexes.skipping import bloom, ir
from indexes.skipping.config import DataSkippingIndexConfig, MinMaxSketch, sketchable
from indexes.skipping.stats import FileStats, Scanned, SketchSpec, StatsAccumulator
from indexes.skipping.store import FileEntry, RowGroup
from indexes.spark_logs import quiet_query_context

log = logging.getLogger("accelerator.indexes.skipping.build")

FILE_COLUMN = "__accelerator_file"


@dataclass(frozen=True)
class ResolvedSketch:
    """A sketch checked against the source: its canonical key, result type and, when it is a
    plain column or nested field, that column's path (for footer statistics)."""

    kind: str
    expression: str
    params: dict
    key: str
    type: str
    path: tuple[str, ...] | None

    def to_json(self) -> dict:
        return {"kind": self.kind, "expression": self.expression, "params": self.params,
                "key": self.key, "type": self.type,
                "path": list(self.path) if self.path is not None else None}

    @staticmethod
    def from_json(d: dict) -> "ResolvedSketch":
        return ResolvedSketch(d["kind"], d["expression"], d.get("params", {}), d["key"],
                              d["type"], tuple(d["path"]) if d.get("path") is not None else None)


def analysed_expressions(df: DataFrame, expressions: list[str]) -> list[tuple[Any, Any, dict]]:
    """(expression tree, Spark JSON type, relation column names by exprId) of each expression,
    from the optimized plan of one ``select`` over ``df``. An expression Spark cannot analyse
    raises its error, which pyspark does not log (the caller reports it)."""
    with quiet_query_context():
        projected = df.select(*[F.expr(e).alias(f"s{i}") for i, e in enumerate(expressions)])
        root = parse_plan(projected._jdf.queryExecution().optimizedPlan().toJSON())
    relation = next((n for n in root.walk() if n.cls == "LogicalRelation"), None)
    if root.cls != "Project" or relation is None:
        return [(None, None, {})] * len(expressions)
    names = {a.expr_id: a.fields["name"] for a in output_attributes(relation)}
    out = []
    for i, alias in enumerate(root.exprs["projectList"]):
        expr = alias.children[0] if alias.cls == "Alias" else alias
        out.append((expr, json.loads(projected.schema[f"s{i}"].dataType.json()), names))
    return out


def _analyse_each(df: DataFrame, sketches: list[Any], where: Any,
                  case_sensitive: bool) -> list[tuple[Any, Any, dict]]:
    """Analyses the sketch expressions: plain column paths together in one plan (they cannot
    interact), after checking them against the schema in Python; the others one plan each
    (Spark prunes a parsed JSON schema to the fields a plan uses, and the sketch must look like
    the query's expression); names the sketch at fault."""
    plain = [i for i, s in enumerate(sketches) if PLAIN_PATH.match(s.expression)]
    for i in plain:
        check_column_path(df.schema, sketches[i].expression, case_sensitive, where(sketches[i]))
    pending = ([plain] if plain else []) + [[i] for i in range(len(sketches)) if i not in plain]
    results: dict[int, tuple] = {}
    while pending:
        group = pending.pop()
        try:
            results.update(zip(group, analysed_expressions(df, [sketches[i].expression for i in group])))
        except Exception as e:  # parse or analysis errors of the user's expression
            if len(group) > 1:   # find the one at fault
                pending.extend([i] for i in group)
                continue
            text = str(e).strip()
            first = text.splitlines()[0] if text else type(e).__name__
            raise InvalidIndexConfigError(
                f"{where(sketches[group[0]])}: not a valid expression over the source: {first}") from None
    return [results[i] for i in range(len(sketches))]


def resolve_sketches(df: DataFrame, config: DataSkippingIndexConfig,
                     partition_columns: list[str], source_format: str | None = None,
                     case_sensitive: bool = False) -> list[ResolvedSketch]:
    """Checks every sketch expression against ``df``, adds MinMax sketches for partition
    columns and the typed bounds of string MinMax sketches (see :func:`typed_sketches`);
    raises InvalidIndexConfigError naming the sketch at fault."""
    config.validate()
    sketches = list(config.sketches)
    declared = {(s.kind, s.expression) for s in sketches}
    sketches += [MinMaxSketch(c) for c in partition_columns if ("MinMax", c) not in declared]

    def where(s: Any) -> str:
        return f"index '{config.indexName}': sketch {s.kind}({s.expression!r})"

    resolved: list[ResolvedSketch] = []
    seen: dict[tuple[str, str], str] = {}
    for s, (expr, data_type, names) in zip(sketches, _analyse_each(df, sketches, where, case_sensitive)):
        if expr is None:
            raise InvalidIndexConfigError(f"{where(s)}: the expression must be computed from each row of the source")
        key = ir.expression_key(expr, names.get)
        if key is None or not any(e.cls == "AttributeReference" for e in expr.walk()):
            raise InvalidIndexConfigError(
                f"{where(s)}: the expression must be deterministic and use columns of the source")
        if not sketchable(data_type):
            raise InvalidIndexConfigError(
                f"{where(s)}: values of type {data_type if isinstance(data_type, str) else data_type.get('type')} "
                "cannot be sketched; use a numeric, string, binary, boolean, date or timestamp expression")
        if (s.kind, key) in seen:
            raise InvalidIndexConfigError(
                f"{where(s)}: the same expression already has a {s.kind} sketch ({seen[(s.kind, key)]!r})")
        seen[(s.kind, key)] = s.expression
        found = chain(expr) if expr.cls == "GetStructField" else None
        if expr.cls == "AttributeReference":
            path = (names[expr.expr_id],)
        elif found is not None and found[0].expr_id in names:
            path = (names[found[0].expr_id],) + found[1]
        else:
            path = None
        resolved.append(ResolvedSketch(s.kind, s.expression, s.params(), key, data_type, path))
    return resolved + typed_sketches(df, resolved, partition_columns, source_format)


#: The casts whose bounds a MinMax sketch over a string expression also records, so that a
#: query casting the string (a number or a time inside JSON or CSV text) prunes with it.
#: Decimal casts are left out: a query's cast names its own precision and scale.
TYPED_CASTS = ("INT", "BIGINT", "DOUBLE", "DATE", "TIMESTAMP")
#: How many of a string sketch's values decide which of its casts are worth computing.
TYPED_SAMPLE = 1000


def _castable(df: DataFrame, expression: str) -> list[str]:
    """The casts of TYPED_CASTS under which at least half of the first TYPED_SAMPLE non-null
    values of ``expression`` cast (a failing cast costs the build far more than one that
    succeeds: ISO times are never cast to numbers, nor numbers to times)."""
    sample = (df.select(F.expr(expression).alias("v")).where(F.col("v").isNotNull())
              .limit(TYPED_SAMPLE))
    counts = sample.select(F.count(F.lit(1)).alias("n"), *[
        F.count(F.expr(f"try_cast(v AS {t})")).alias(t) for t in TYPED_CASTS]).collect()[0]
    return [t for t in TYPED_CASTS if counts["n"] and 2 * counts[t] >= counts["n"]]


def typed_sketches(df: DataFrame, resolved: list[ResolvedSketch], partition_columns: list[str],
                   source_format: str | None) -> list[ResolvedSketch]:
    """MinMax sketches of ``CAST((e) AS t)`` for each string MinMax sketch ``e`` and each
    ``t`` of TYPED_CASTS most of ``e``'s values cast to (:func:`_castable`) that no sketch
    declares already (params ``typedFrom``: ``e``). Not over partition columns, nor over plain
    Parquet columns: their footers answer ``e``'s own sketch without reading the file, and a
    cast would need the scan."""
    known = {s.key for s in resolved if s.kind == "MinMax"}
    out: list[ResolvedSketch] = []
    for s in resolved:
        if s.kind != "MinMax" or s.type != "string" or s.params.get("typedFrom") is not None \
                or (s.path is not None and (source_format == "parquet"
                                            or s.path[0] in partition_columns)):
            continue
        for target in _castable(df, s.expression):
            text = f"CAST(({s.expression}) AS {target})"
            (expr, data_type, names), = analysed_expressions(df, [text])
            key = None if expr is None else ir.expression_key(expr, names.get)
            if key is not None and key not in known and sketchable(data_type):
                known.add(key)
                out.append(ResolvedSketch("MinMax", text, {"typedFrom": s.expression}, key,
                                          data_type, None))
    return out


def _whole_call(text: str, function: str) -> bool:
    """Whether ``text`` is one call of ``function`` (its closing parenthesis ends the text),
    reading SQL string literals and quoted names as opaque."""
    body = text.strip()
    head = re.match(rf"{function}\s*\(", body, re.IGNORECASE)
    if head is None:
        return False
    depth, i, quote = 0, head.end() - 1, None
    while i < len(body):
        c = body[i]
        if quote is not None:
            if c == "\\" and quote != "`":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i == len(body) - 1
        i += 1
    return False


def computed_expression(expression: str, ansi: bool) -> str:
    """What the build evaluates for a sketch: in ANSI mode a sketch that is one cast is
    evaluated as ``try_cast`` (a value that does not cast gives null instead of failing the
    build, and the file's null count then tells the evaluator a query's cast may raise there,
    so it is never skipped on that sketch); otherwise the expression itself."""
    if ansi and _whole_call(expression, "cast"):
        return "try_" + expression.strip()
    return expression


def sketch_specs(sketches: list[ResolvedSketch]) -> list[SketchSpec]:
    """One SketchSpec per distinct expression key, combining the sketches declared on it."""
    specs: dict[str, dict] = {}
    for s in sketches:
        spec = specs.setdefault(s.key, {"key": s.key, "type": s.type})
        if s.kind == "MinMax":
            spec["minmax"] = True
        elif s.kind == "ValueList":
            spec["max_values"] = int(s.params["maxValues"])
        else:
            spec["bloom_capacity"] = int(s.params["expectedDistinctCountPerFile"])
            spec["bloom_fpp"] = float(s.params["fpp"])
    return [SketchSpec(**d) for d in specs.values()]


# --- the Spark job over the sketched expressions ---------------------------------------------
# A task's statistics of a file go to the driver as partials: per row group (``grp`` 0 for a
# file without a layout) with a Bloom filter sized for the row group's rows, and per file
# (``grp`` FILE_BLOOM) only the file's Bloom filter. A file of many row groups then sends its
# values' filters once at the file's size and once split over its row groups, not a file-sized
# filter per row group.
FILE_BLOOM = -1


def group_spec(spec: SketchSpec, rows: int | None) -> SketchSpec:
    """What a row group's partial computes of ``spec``: everything, with the Bloom filter
    sized for the row group's ``rows`` (it cannot hold more values); no filter for a file
    without a layout (``rows`` None: its file filter serves)."""
    if not spec.bloom_capacity or rows is None:
        return replace(spec, bloom_capacity=None, bloom_fpp=None)
    return replace(spec, bloom_capacity=max(1, min(spec.bloom_capacity, rows)))


def bloom_spec(spec: SketchSpec) -> SketchSpec | None:
    """What a file's Bloom partial computes of ``spec`` (None when it has no Bloom filter)."""
    return replace(spec, minmax=False, max_values=None) if spec.bloom_capacity else None


def _rows_between(bounds: list[int], g: int) -> int | None:
    """Row group ``g``'s rows from the boundaries; None past the last (the file has changed)."""
    return bounds[g + 1] - bounds[g] if g + 1 < len(bounds) else None


def scan_partition(specs: list[SketchSpec], bounds_of: Callable[[str], list[int] | None] | None):
    """Task function: each file's partial statistics (see FILE_BLOOM) and row counts per row
    group (``sketch`` -1). ``bounds_of``: a file's row group boundaries by its URI (each row
    group's first row, then the file's row count; None: one row group), when the batches carry
    the row's index in the file after its file (None: they do not). Then, per spec ``i``, its
    values ``s<i>`` (when bounds or a value list need them) and the values' xxhash64 ``h<i>``
    (when it has a Bloom filter; hashed here from ``s<i>`` when absent)."""
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from indexes.skipping.stats import distinct_hashes, distinct_values

        per_file = [bloom_spec(s) for s in specs]
        accs: dict[tuple[str, int, int], StatsAccumulator] = {}
        counts: dict[tuple[str, int], int] = {}
        for batch in batches:
            files = batch.column(0)
            names = pc.unique(files).to_pylist()
            for name in names:
                rows = batch.filter(pc.equal(files, name)) if len(names) > 1 else batch
                bounds = bounds_of(name) if bounds_of is not None else None
                if bounds is None:
                    parts = [(0, None, rows)]
                else:
                    group = np.searchsorted(bounds, rows.column(1).to_numpy(), side="right") - 1
                    parts = [(int(g), _rows_between(bounds, g), rows.filter(pa.array(group == g)))
                             for g in np.unique(group)]
                for g, group_rows, part in parts:
                    counts[(name, g)] = counts.get((name, g), 0) + part.num_rows
                    present = set(part.schema.names)
                    for i, spec in enumerate(specs):
                        values = part.column(f"s{i}") if f"s{i}" in present else None
                        hashes = part.column(f"h{i}") if f"h{i}" in present else None
                        column = values if values is not None else hashes
                        found = []
                        for target in [g] + ([FILE_BLOOM] if per_file[i] is not None else []):
                            acc = accs.get((name, target, i))
                            if acc is None:
                                acc = accs[(name, target, i)] = StatsAccumulator(
                                    per_file[i] if target == FILE_BLOOM
                                    else group_spec(spec, group_rows))
                            found.append(acc)
                        distinct = (distinct_values(values, spec.type) if values is not None and any(
                            a.needs_values or (hashes is None and a.hashes is not None) for a in found)
                            else [])
                        unique = distinct_hashes(hashes) if hashes is not None else None
                        for acc in found:
                            acc.add_distinct(len(column), column.null_count, distinct, unique)
        out: list[tuple[str, int, int, bytes]] = [
            (name, g, i, acc.to_bytes()) for (name, g, i), acc in accs.items()]
        # files with no sketch still count rows
        out += [(name, g, -1, n.to_bytes(8, "little")) for (name, g), n in counts.items()]
        yield pa.RecordBatch.from_arrays(
            [pa.array([o[0] for o in out], pa.string()), pa.array([o[1] for o in out], pa.int32()),
             pa.array([o[2] for o in out], pa.int32()), pa.array([o[3] for o in out], pa.binary())],
            names=["file", "grp", "sketch", "partial"])
    return run


def session_ansi(spark: Any) -> bool:
    """The session's spark.sql.ansi.enabled: statistics are computed under it (and recorded with
    it: the index serves only queries run under the same setting)."""
    return str(spark.conf.get("spark.sql.ansi.enabled")).lower() == "true"


PARTIALS_SCHEMA = "file string, grp int, sketch int, partial binary"


def scan_partials(df: DataFrame, sketches: list[ResolvedSketch], specs: list[SketchSpec],
                  bounds_of: Callable[[str], list[int] | None] | None) -> DataFrame:
    """The partial statistics (:data:`PARTIALS_SCHEMA`, see :func:`scan_partition`) of
    ``specs`` of every file that holds rows, and of each row group of the files of several
    (``bounds_of``, called in the tasks; None: no file has several), as a DataFrame (one job,
    when it runs)."""
    expr_of = {s.key: s.expression for s in sketches}
    ansi = session_ansi(df.sparkSession)
    columns = [F.col("_metadata.file_path").alias(FILE_COLUMN)]
    if bounds_of is not None:
        columns.append(F.col("_metadata.row_index"))
    for i, spec in enumerate(specs):
        computed = computed_expression(expr_of[spec.key], ansi)
        if spec.minmax or spec.max_values is not None or not spec.bloom_capacity:
            columns.append(F.expr(computed).alias(f"s{i}"))
        if spec.bloom_capacity:   # hashed by the JVM: Python only sets the filter's bits
            columns.append(F.expr(bloom.hash_expression(computed, spec.type)).alias(f"h{i}"))
    return df.select(*columns).mapInArrow(scan_partition(specs, bounds_of), PARTIALS_SCHEMA)


def fold_partials(specs: list[SketchSpec], partials: list[tuple[str, int, int, bytes]],
                  layered: set[str]) -> Scanned:
    """Each file's statistics, merged from the tasks' partials (``(path, grp, sketch,
    partial)`` as :func:`scan_partition` emits them), and the row groups' own for the
    ``layered`` files."""
    counts: dict[tuple[str, int], int] = {}
    accs: dict[tuple[str, int, int], StatsAccumulator] = {}
    for path, g, i, data in partials:
        if i < 0:
            counts[(path, g)] = counts.get((path, g), 0) + int.from_bytes(data, "little")
            continue
        # a row group's filter keeps its own size (restored from the partial's bytes)
        part = StatsAccumulator.from_bytes(
            bloom_spec(specs[i]) if g == FILE_BLOOM
            else specs[i] if path in layered else group_spec(specs[i], None), data)
        acc = accs.get((path, g, i))
        if acc is None:
            accs[(path, g, i)] = part
        else:
            acc.merge(part)
    files: dict[str, FileStats] = {}
    groups: dict[str, dict[int, FileStats]] = {}
    by_path: dict[str, list[int]] = {}
    for path, g in counts:
        by_path.setdefault(path, []).append(g)
    for path, ordinals in by_path.items():
        merged: dict[int, StatsAccumulator] = {}
        for g in sorted(ordinals):
            parts = {i: accs[(path, g, i)] for i in range(len(specs)) if (path, g, i) in accs}
            if path in layered:   # taken before the parts are merged into the file's
                groups.setdefault(path, {})[g] = FileStats(
                    counts[(path, g)], {specs[i].key: part.result() for i, part in parts.items()})
            for i, part in parts.items():   # into a file's, whose filter is the FILE_BLOOM one
                if i not in merged:
                    merged[i] = StatsAccumulator(group_spec(specs[i], None))
                merged[i].merge(part)
        columns = {}
        for i, acc in merged.items():
            blooms = accs.get((path, FILE_BLOOM, i))
            columns[specs[i].key] = replace(acc.result(),
                                            bloom=blooms.bloom if blooms is not None else None)
        files[path] = FileStats(sum(counts[(path, g)] for g in ordinals), columns)
    return Scanned(files, groups)


def file_entry(size: int, mtime: int, footers: tuple[FileStats | None, dict[int, FileStats]],
               scanned: tuple[FileStats | None, dict[int, FileStats]],
               ranges: Sequence[tuple[int, int]] | None, empty_rows: int | None) -> FileEntry:
    """A file's entry from what its footer and the scan found (each: the file's statistics and
    its row groups' by ordinal), its row groups' byte ``ranges`` (None: not several), and its
    row count when neither found anything (``empty_rows``: 0 when the scan read it)."""
    stats = _merged([footers[0], scanned[0]])
    if stats is None:   # the scan read the file and found no rows
        stats = FileStats(empty_rows, {})
    groups = () if ranges is None else tuple(
        RowGroup(start, end, _merged([footers[1].get(g), scanned[1].get(g)]) or FileStats(None, {}))
        for g, (start, end) in enumerate(ranges))
    return FileEntry(int(size), int(mtime), stats, groups)


def _merged(parts: list[FileStats | None]) -> FileStats | None:
    """The statistics of one file or row group from what the footers and the scan found."""
    found = [p for p in parts if p is not None]
    if not found:
        return None
    columns: dict = {}
    for p in found:
        columns.update(p.columns)
    return FileStats(found[0].rows, columns)
