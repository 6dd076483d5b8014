"""Random index sets over a generated dataset: covering indexes with random indexed and
included columns (arrays and maps among the included ones), data-skipping indexes with random
sketches (over columns, JSON paths and expressions over arrays and maps), text indexes and the
cache, on the columns the dataset has (see :class:`tests.fuzz.data.Columns`). Each index is a
small spec that can be created in a session or written as Python code.

Every kind is drawn for every source format of :data:`tests.fuzz.data.FORMATS`: docs/api.md
documents ``createIndex`` over ``spark.read.parquet/json/csv/orc`` for all kinds (data skipping
computes statistics with a Spark job where no Parquet footer serves; a text index groups the
rows of a JSON or CSV file without row groups) and ``hs.cache`` of JSON and CSV, also
gzip-compressed. Only ``hs.search(..., score=True)``, which the fuzzer does not call, needs a
Parquet source."""
from __future__ import annotations

import random
from dataclasses import dataclass

from tests.fuzz.data import SCALARS, Columns

JSON_PATHS = ["get_json_object(j, '$.a')", "get_json_object(j, '$.b')",
              "cast(get_json_object(j, '$.a') as int)",
              "cast(get_json_object(j, '$.c.d') as double)"]
# Sketch expressions over the collections, with the column each reads.
COLLECTION_SKETCHES = {"size(arr)": "arr", "array_max(arr)": "arr", "m['a']": "m",
                       "size(items)": "items"}


@dataclass(frozen=True)
class IndexSpec:
    """One index (or a cache warm-up) over a dataset: ``kind`` is covering, skipping, text or
    cache; ``args`` its columns or sketches as ``(sketch, expression)`` pairs; ``lineage``
    (covering) builds it with the lineage column."""

    kind: str
    name: str
    dataset: str
    args: tuple
    included: tuple = ()
    lineage: bool = False

    def code(self, df: str) -> str:
        """Python code creating this index over the DataFrame variable ``df`` with ``hs``."""
        if self.kind == "covering":
            call = (f"hs.createIndex({df}, IndexConfig({self.name!r}, indexedColumns="
                    f"{list(self.args)!r}, includedColumns={list(self.included)!r}))")
            if self.lineage:
                return ("spark.conf.set('spark.accelerator.index.lineage.enabled', 'true'); "
                        f"{call}; spark.conf.set('spark.accelerator.index.lineage.enabled', "
                        "'false')")
            return call
        if self.kind == "skipping":
            sketches = ", ".join(f"{kind}({expr!r})" for kind, expr in self.args)
            return f"hs.createIndex({df}, DataSkippingIndexConfig({self.name!r}, {sketches}))"
        if self.kind == "text":
            column, scoring = self.args
            return (f"hs.createIndex({df}, TextIndexConfig({self.name!r}, column={column!r}, "
                    f"scoring={scoring!r}))")
        columns = f"{df}.select({', '.join(repr(c) for c in self.args)})" if self.args else df
        return f"hs.cache({columns})"


def create(spark, hs, df, spec: IndexSpec) -> None:
    """Creates the index ``spec`` over ``df`` (or warms the cache with it)."""
    namespace = {"spark": spark, "hs": hs, "df": df}
    exec("from accelerator import *\n" + spec.code("df"), namespace)   # noqa: S102 (own code)


def _covering(rng: random.Random, name: str, dataset: str, columns: Columns,
              keys: list[str] | None) -> IndexSpec:
    scalars = list(columns.scalars)
    indexed = keys or rng.sample([c for c in scalars if SCALARS[c] != "boolean"],
                                 rng.choice([1, 1, 2]))
    rest = [c for c in scalars if c not in indexed and not any(c.startswith(i + ".") for i in indexed)]
    rest += list(columns.collections)
    if rng.random() < 0.4:   # everything: answers most queries
        included = rest
    else:
        included = rng.sample(rest, rng.randint(0, len(rest)))
    if ("n" in columns.top_level and rng.random() < 0.2
            and not any(c.startswith("n.") for c in indexed)):   # the whole struct
        included = [c for c in included if not c.startswith("n.")] + ["n"]
    return IndexSpec("covering", name, dataset, tuple(indexed), tuple(included),
                     lineage=rng.random() < 0.3)


def _skipping(rng: random.Random, name: str, dataset: str, columns: Columns) -> IndexSpec:
    sketches = []
    expressions = list(columns.scalars) + JSON_PATHS + [
        e for e, column in COLLECTION_SKETCHES.items() if column in columns.collections]
    for expr in rng.sample(expressions, rng.randint(1, 4)):
        kinds = ["MinMaxSketch"]
        if SCALARS.get(expr) != "boolean":
            kinds += ["BloomFilterSketch", "ValueListSketch"]
        sketches.append((rng.choice(kinds), expr))
    return IndexSpec("skipping", name, dataset, tuple(sketches))


def random_set(rng: random.Random, dataset: str, columns: Columns,
               join_keys: list[str] | None = None) -> list[IndexSpec]:
    """One to four indexes of random kinds over ``dataset`` (named ``<dataset>_<n>``) on its
    ``columns``; with ``join_keys``, the first is a covering index on them (for the join
    rule)."""
    specs: list[IndexSpec] = []
    if join_keys:
        specs.append(_covering(rng, f"{dataset}_c0", dataset, columns, join_keys))
    for i in range(rng.randint(1, 3)):
        name = f"{dataset}_{i + 1}"
        kind = rng.choice(["covering", "covering", "skipping", "skipping", "text", "cache"])
        if kind == "covering":
            specs.append(_covering(rng, name, dataset, columns, None))
        elif kind == "skipping":
            specs.append(_skipping(rng, name, dataset, columns))
        elif kind == "text":
            if not any(s.kind == "text" for s in specs):
                strings = [c for c, t in columns.scalars.items() if t == "string"]
                specs.append(IndexSpec("text", name, dataset,
                                       (rng.choice(strings), rng.random() < 0.3)))
        elif not any(s.kind == "cache" for s in specs):
            cached = (() if rng.random() < 0.5
                      else tuple(rng.sample(columns.top_level, rng.randint(1, 6))))
            specs.append(IndexSpec("cache", name, dataset, cached))
    return specs


def focus(specs: list[IndexSpec], dataset: str) -> tuple:
    """The columns the indexes of ``dataset`` can prune or look up by (``j`` for JSON paths,
    the array or map a sketch expression over one reads)."""
    out = []
    for spec in specs:
        if spec.dataset != dataset:
            continue
        if spec.kind == "covering":
            out.append(spec.args[0])
        elif spec.kind == "text":
            out.append(spec.args[0])
        elif spec.kind == "skipping":
            out += [expr if expr in SCALARS else COLLECTION_SKETCHES.get(expr, "j")
                    for _, expr in spec.args]
    return tuple(out)


def covered(specs: list[IndexSpec], dataset: str) -> tuple:
    """The columns of one covering index of ``dataset`` (none without one)."""
    for spec in specs:
        if spec.dataset == dataset and spec.kind == "covering":
            return spec.args + spec.included
    return ()
