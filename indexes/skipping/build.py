"""Building a data-skipping index: resolve the sketches against the source, then compute the
statistics of every file, from Parquet footers where they can be trusted and otherwise with one
Spark job over only the sketched expressions, grouped by file."""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Iterator

from pyspark.sql import DataFrame, functions as F

from indexes.errors import InvalidIndexConfigError
from indexes.plan import chain, output_attributes, parse_plan
from indexes.skipping import ir
from indexes.skipping.config import DataSkippingIndexConfig, MinMaxSketch, sketchable
from indexes.skipping import values as V
from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec, StatsAccumulator, bounded
from indexes.skipping.store import FileEntry
from indexes.source import hadoop_path, local_path

log = logging.getLogger("accelerator.skipping")

FILE_COLUMN = "__accelerator_file"
# Up to this many files, the driver reads the Parquet footers itself.
DRIVER_FOOTERS = 64


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


_PLAIN_PATH = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*(\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*\s*$")


def analysed_expressions(df: DataFrame, expressions: list[str]) -> list[tuple[Any, Any, dict]]:
    """(expression tree, Spark JSON type, relation column names by exprId) of each expression,
    from the optimized plan of one ``select`` over ``df``."""
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


def _analyse_each(df: DataFrame, sketches: list[Any], where: Any) -> list[tuple[Any, Any, dict]]:
    """Analyses the sketch expressions: plain column paths together in one plan (they cannot
    interact), the others one plan each (Spark prunes a parsed JSON schema to the fields a plan
    uses, and the sketch must look like the query's expression); names the sketch at fault."""
    plain = [i for i, s in enumerate(sketches) if _PLAIN_PATH.match(s.expression)]
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
                     partition_columns: list[str], source_format: str | None = None
                     ) -> list[ResolvedSketch]:
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
    for s, (expr, data_type, names) in zip(sketches, _analyse_each(df, sketches, where)):
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
def _scan_partition(specs: list[SketchSpec]):
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        accs: dict[tuple[str, int], StatsAccumulator] = {}
        counts: dict[str, int] = {}
        for batch in batches:
            files = batch.column(0)
            names = pc.unique(files).to_pylist()
            for name in names:
                rows = batch.filter(pc.equal(files, name)) if len(names) > 1 else batch
                counts[name] = counts.get(name, 0) + rows.num_rows
                for i, spec in enumerate(specs):
                    acc = accs.get((name, i))
                    if acc is None:
                        acc = accs[(name, i)] = StatsAccumulator(spec)
                    acc.add_arrow(rows.column(i + 1))
        names, ordinals, partials = [], [], []
        for (name, i), acc in accs.items():
            names.append(name)
            ordinals.append(i)
            partials.append(acc.to_bytes())
        for name, n in counts.items():  # files with no sketch still count rows
            names.append(name)
            ordinals.append(-1)
            partials.append(n.to_bytes(8, "little"))
        yield pa.RecordBatch.from_arrays(
            [pa.array(names, pa.string()), pa.array(ordinals, pa.int32()),
             pa.array(partials, pa.binary())], names=["file", "sketch", "partial"])
    return run


def scan_stats(df: DataFrame, sketches: list[ResolvedSketch],
               specs: list[SketchSpec]) -> dict[str, FileStats]:
    """Statistics of ``specs`` for every file that holds rows, by one Spark job."""
    expr_of = {s.key: s.expression for s in sketches}
    ansi = str(df.sparkSession.conf.get("spark.sql.ansi.enabled")).lower() == "true"
    columns = [F.col("_metadata.file_path").alias(FILE_COLUMN)]
    columns += [F.expr(computed_expression(expr_of[spec.key], ansi)).alias(f"s{i}")
                for i, spec in enumerate(specs)]
    rows = (df.select(*columns)
            .mapInArrow(_scan_partition(specs), "file string, sketch int, partial binary")
            .collect())
    rows_per_file: dict[str, int] = {}
    accs: dict[tuple[str, int], StatsAccumulator] = {}
    for r in rows:
        path = hadoop_path(r.file)
        if r.sketch < 0:
            rows_per_file[path] = rows_per_file.get(path, 0) + int.from_bytes(r.partial, "little")
            continue
        part = StatsAccumulator.from_bytes(specs[r.sketch], bytes(r.partial))
        acc = accs.get((path, r.sketch))
        if acc is None:
            accs[(path, r.sketch)] = part
        else:
            acc.merge(part)
    out: dict[str, FileStats] = {}
    for path, n in rows_per_file.items():
        out[path] = FileStats(n, {spec.key: accs[(path, i)].result()
                                  for i, spec in enumerate(specs) if (path, i) in accs})
    return out


# --- Parquet footers ------------------------------------------------------------------------
_FOOTER_TYPES = {
    "byte": ("INT32", {"int(bitwidth=8,issigned=true)"}),
    "short": ("INT32", {"int(bitwidth=16,issigned=true)"}),
    "integer": ("INT32", {"none", "int(bitwidth=32,issigned=true)"}),
    "long": ("INT64", {"none", "int(bitwidth=64,issigned=true)"}),
    "date": ("INT32", {"date"}),
    "string": ("BYTE_ARRAY", {"string"}),
}


def _footer_type_ok(column: Any, spark_type: str) -> bool:
    """Whether a Parquet leaf column's statistics order values exactly like the Spark type
    (unsigned integers, INT96 timestamps, floats (NaN) and FLBA decimals are left out)."""
    logical = str(column.logical_type).replace(" ", "").lower()
    if spark_type.startswith("decimal("):
        precision, scale = spark_type[len("decimal("):-1].split(",")
        return (column.physical_type in ("INT32", "INT64")
                and logical == f"decimal(precision={precision},scale={scale})")
    expected = _FOOTER_TYPES.get(spark_type)
    return expected is not None and column.physical_type == expected[0] and logical in expected[1]


def _read_footers(wanted: list[tuple[int, tuple[str, ...], str]]):
    """Task function: (path → rows, {spec ordinal: (nulls, min, max)}) from each file's footer,
    leaving out columns whose statistics are missing or not trustworthy."""
    def run(paths: Iterator[str]) -> Iterator[tuple[str, int, dict]]:
        import pyarrow.parquet as pq

        for path in paths:
            meta = pq.ParquetFile(local_path(path)).metadata
            schema = meta.schema
            leaf = {tuple(schema.column(j).path.split(".")): j for j in range(meta.num_columns)}
            found: dict[int, tuple] = {}
            for ordinal, col_path, spark_type in wanted:
                j = leaf.get(col_path)
                if j is None or not _footer_type_ok(schema.column(j), spark_type):
                    continue
                nulls, lo, hi, ok = 0, None, None, True
                key = lambda v: V.order_key(v, spark_type)  # noqa: E731
                for g in range(meta.num_row_groups):
                    chunk = meta.row_group(g).column(j)
                    st = chunk.statistics
                    n = meta.row_group(g).num_rows
                    if st is None or not st.has_null_count:
                        ok = False
                        break
                    nulls += st.null_count
                    if st.null_count == n:
                        continue
                    if not st.has_min_max:
                        ok = False
                        break
                    gl, gh = (V.from_python(st.min, spark_type), V.from_python(st.max, spark_type))
                    lo = gl if lo is None or key(gl) < key(lo) else lo
                    hi = gh if hi is None or key(gh) > key(hi) else hi
                if ok:
                    found[ordinal] = (nulls, lo, hi)
            yield path, meta.num_rows, found
    return run


def footer_stats(df: DataFrame, paths: list[str], sketches: list[ResolvedSketch],
                 specs: list[SketchSpec]) -> tuple[dict[str, FileStats], set[str]]:
    """Statistics of the MinMax-only specs over plain columns, from Parquet footers.

    Returns the statistics per file and the keys of the specs that footers answered for EVERY
    file (the others are computed by the scan job). Only local files are read this way; many
    of them by a Spark job, a few by the driver."""
    path_of = {s.key: s.path for s in sketches}
    wanted = [(i, path_of[spec.key], spec.type) for i, spec in enumerate(specs)
              if spec.minmax and spec.max_values is None and spec.bloom_capacity is None
              and path_of.get(spec.key) is not None]
    if not wanted or not paths or any(local_path(p) is None for p in paths):
        return {}, set()
    if len(paths) <= DRIVER_FOOTERS:   # a Spark job (with Python workers) costs more
        found = list(_read_footers(wanted)(iter(paths)))
    else:
        sc = df.sparkSession.sparkContext
        slices = max(1, min(len(paths), sc.defaultParallelism * 4))
        found = sc.parallelize(paths, slices).mapPartitions(_read_footers(wanted)).collect()
    answered = {i for i, _, _ in wanted}
    for _, _, per in found:
        answered &= set(per)
    out: dict[str, FileStats] = {}
    for path, rows, per in found:
        columns = {}
        for i in answered:
            nulls, lo, hi = per[i]
            columns[specs[i].key] = ColumnStats(specs[i].type, *bounded(lo, hi), nulls)
        out[path] = FileStats(rows, columns)
    return out, {specs[i].key for i in answered}


def compute_stats(df: DataFrame, source: dict, sketches: list[ResolvedSketch],
                  files: list[list]) -> tuple[dict[str, FileEntry], dict]:
    """Statistics of every file of ``files`` ([path, size, mtime]) that ``df`` reads; returns
    the entries and build facts (which sketches came from footers, which from the scan)."""
    specs = sketch_specs(sketches)
    paths = [f[0] for f in files]
    from_footers, footer_keys = ({}, set())
    if source.get("format") == "parquet":
        from_footers, footer_keys = footer_stats(df, paths, sketches, specs)
    rest = [s for s in specs if s.key not in footer_keys]
    scanned = scan_stats(df, sketches, rest) if rest or not from_footers else {}
    entries: dict[str, FileEntry] = {}
    for path, size, mtime in files:
        merged: dict = {}
        rows = None
        for part in (from_footers.get(path), scanned.get(path)):
            if part is not None:
                merged.update(part.columns)
                rows = part.rows if rows is None else rows
        if rows is None and (rest or not from_footers):
            rows = 0  # the scan read the file and found no rows
        entries[path] = FileEntry(int(size), int(mtime), FileStats(rows, merged))
    facts = {"footerSketches": sorted(footer_keys), "scannedSketches": [s.key for s in rest]}
    return entries, facts
