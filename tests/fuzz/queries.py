"""Random queries over one or two registered datasets (views ``t`` and ``u``): filters and
projections, aggregates, equi-joins on the indexed keys, unions and IN/EXISTS subqueries, each
written as SQL or with the DataFrame API. Each side uses only the columns its dataset has (a
CSV dataset has no struct column); joins, IN and EXISTS relate the two on ``k``, which every
dataset has."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from pyspark.sql import functions as F

from tests.fuzz.data import PARTITION, SCALARS, Dataset
from tests.fuzz.preds import Pred, PredicateGenerator

# filters and projections, the cheapest to run, are the most common
SHAPES = ["select"] * 6 + ["agg", "join", "union", "in", "exists", "semi"]
JOIN_KEYS = ["k"]
GROUPED_DOUBLES = ["n.z.w"]   # the double columns aggregates group by (where a dataset has them)


@dataclass(frozen=True)
class Query:
    """A query: its ``shape``, ``api`` (``sql`` or ``df``), projected ``columns`` of ``t``
    (and ``other`` of ``u``), filters ``pred`` on ``t`` and ``pred2`` on ``u``, and the
    grouping column of an aggregate."""

    shape: str
    api: str
    columns: tuple
    pred: Pred | None
    other: tuple = ()
    pred2: Pred | None = None
    group: str = ""

    def sql(self) -> str:
        """The query as Spark SQL over the views ``t`` and ``u``."""
        where = f" WHERE {self.pred.sql()}" if self.pred else ""
        where2 = f" WHERE {self.pred2.sql()}" if self.pred2 else ""
        cols = ", ".join(f"t.{c}" for c in self.columns) or "1 AS one"
        if self.shape == "select":
            return f"SELECT {cols} FROM t{where}"
        if self.shape == "agg":
            measures = ", ".join(_aggregates(self.columns))
            return (f"SELECT t.{self.group} AS g, {measures} FROM t{where} "
                    f"GROUP BY t.{self.group}")
        if self.shape == "join":
            right = ", ".join(f"u.{c}" for c in self.other)
            both = cols + (", " + right if right else "")
            conds = " AND ".join(p.sql() for p in (self.pred, self.pred2) if p)
            return (f"SELECT {both} FROM t JOIN u ON t.k = u.k"
                    + (f" WHERE {conds}" if conds else ""))
        if self.shape == "union":
            return f"SELECT {cols} FROM t{where} UNION ALL SELECT {cols} FROM t{where2}"
        if self.shape == "in":
            return f"SELECT {cols} FROM t WHERE t.k IN (SELECT u.k FROM u{where2})" + (
                f" AND {self.pred.sql()}" if self.pred else "")
        if self.shape == "exists":
            inner = f" AND {self.pred2.sql()}" if self.pred2 else ""
            return (f"SELECT {cols} FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k{inner})"
                    + (f" AND {self.pred.sql()}" if self.pred else ""))
        # semi: NOT IN over a subquery that may hold nulls
        return f"SELECT {cols} FROM t WHERE t.k NOT IN (SELECT u.k FROM u{where2})" + (
            f" AND {self.pred.sql()}" if self.pred else "")

    def dataframe_code(self) -> str:
        """Python code (over ``spark`` and ``F``) building the query with the DataFrame API
        over the views ``t`` and ``u``, as an expression."""
        t = 'spark.table("t").alias("t")'
        u = 'spark.table("u").alias("u")'
        t_filtered = f"{t}.filter(F.expr({self.pred.sql()!r}))" if self.pred else t
        u_filtered = f"{u}.filter(F.expr({self.pred2.sql()!r}))" if self.pred2 else u
        cols = ", ".join(f"F.expr({'t.' + c!r})" for c in self.columns) or 'F.lit(1).alias("one")'
        if self.shape == "select":
            return f"{t_filtered}.select({cols})"
        if self.shape == "agg":
            measures = ", ".join(f"F.expr({a!r})" for a in _aggregates(self.columns))
            return (f"{t_filtered}.groupBy(F.expr({'t.' + self.group!r}).alias('g'))"
                    f".agg({measures})")
        if self.shape == "join":
            right = "".join(f", F.expr({'u.' + c!r})" for c in self.other)
            return f"{t_filtered}.join({u_filtered}, F.expr('t.k = u.k')).select({cols}{right})"
        if self.shape == "union":
            t2 = f"{t}.filter(F.expr({self.pred2.sql()!r}))" if self.pred2 else t
            return f"{t_filtered}.select({cols}).unionAll({t2}.select({cols}))"
        keys = f"{u_filtered}.select(F.col('u.k').alias('key'))"
        if self.shape == "in":
            return f"{t_filtered}.join({keys}, F.expr('t.k = key'), 'left_semi').select({cols})"
        if self.shape == "exists":
            return f"{t_filtered}.join({u_filtered}, F.expr('u.k = t.k'), 'left_semi').select({cols})"
        return (f"{t_filtered}.join({keys}, F.expr('t.k = key OR key IS NULL OR t.k IS NULL'), "
                f"'left_anti').select({cols})")

    def build(self, spark):
        """The DataFrame of this query in its ``api``."""
        if self.api == "sql":
            return spark.sql(self.sql())
        return eval(self.dataframe_code(), {"spark": spark, "F": F})   # noqa: S307 (own code)

    def code(self) -> str:
        """Python code building this query's DataFrame (over ``spark`` and ``F``)."""
        return f"spark.sql({self.sql()!r})" if self.api == "sql" else self.dataframe_code()

    def smaller(self):
        """Simpler queries to try when minimizing: fewer predicates, fewer columns."""
        for field in ("pred", "pred2"):
            pred = getattr(self, field)
            if pred is None:
                continue
            yield replace(self, **{field: None})
            for smaller in pred.smaller():
                yield replace(self, **{field: smaller})
        for field in ("columns", "other"):
            values = getattr(self, field)
            for i in range(len(values)):
                if len(values) > 1 or field == "other":
                    yield replace(self, **{field: values[:i] + values[i + 1:]})
        if self.api == "df":
            yield replace(self, api="sql")


def _aggregates(columns: tuple) -> list[str]:
    out = ["count(*) AS n"]
    for c in columns:
        alias = c.replace(".", "_")
        out.append(f"count(t.{c}) AS c_{alias}")
        if c in SCALARS and SCALARS[c] not in ("boolean",):
            out += [f"min(t.{c}) AS lo_{alias}", f"max(t.{c}) AS hi_{alias}"]
        if c in SCALARS and SCALARS[c] in ("int", "long", "decimal"):
            out.append(f"sum(t.{c}) AS sum_{alias}")
    return out


def random_query(rng: random.Random, t: Dataset, u: Dataset, t_focus: tuple = (),
                 u_focus: tuple = (), t_covered: tuple = ()) -> Query:
    """A random query over the datasets ``t`` and ``u``, filtering more often on the
    ``focus`` columns of each and often projecting only ``t_covered`` columns (those a
    covering index holds)."""
    shape = rng.choice(SHAPES)
    api = "df" if rng.random() < 0.4 else "sql"
    gen_t = PredicateGenerator(rng, t, "t", t_focus)
    gen_u = PredicateGenerator(rng, u, "u", u_focus)
    columns = _columns(rng, t)
    if t_covered and rng.random() < 0.5:
        columns = tuple(rng.sample(t_covered, rng.randint(1, min(4, len(t_covered)))))
    pred = gen_t.tree() if rng.random() < 0.85 else None
    if shape == "agg":
        scalars = t.columns.scalars
        group = rng.choice([c for c in scalars if scalars[c] != "double"]
                           + [c for c in GROUPED_DOUBLES if c in scalars])
        return Query("agg", api, tuple(rng.sample(list(scalars), rng.randint(0, 3))), pred,
                     group=group)
    if shape == "select":
        return Query("select", api, columns, pred)
    if shape == "union":
        return Query("union", api, columns, pred, pred2=gen_t.tree() if rng.random() < 0.8 else None)
    pred2 = gen_u.tree() if rng.random() < 0.6 else None
    other = _columns(rng, u)[:rng.randint(0, 3)] if shape == "join" else ()
    return Query(shape, api, columns, pred, other=other, pred2=pred2)


def _columns(rng: random.Random, dataset: Dataset) -> tuple:
    """Columns of ``dataset`` to project: all top-level ones or a few of any kind."""
    columns = dataset.columns
    pool = [*columns.scalars, *columns.structs] + ([PARTITION] if dataset.partitioned else [])
    if rng.random() < 0.1:
        return columns.top_level
    return tuple(rng.sample(pool, rng.randint(1, 5)))
