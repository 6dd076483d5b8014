"""Random queries over one or two registered datasets (views ``t`` and ``u``): filters and
projections, aggregates, equi-joins on the indexed keys, unions and IN/EXISTS subqueries; and,
drawn for a share of queries after one of those (see :func:`random_query`), outer joins with
their filters in ON or WHERE, set operations (UNION, INTERSECT, EXCEPT, with ALL where Spark
has it), ORDER BY ... LIMIT and window functions. Each is written as SQL or with the DataFrame
API. Each side uses only the columns its dataset has (a CSV dataset has no struct, array or
map column; no set operation holds a map);
joins, IN, EXISTS and set operations with ``u`` relate the two on ``k`` (and on columns both
have), which every dataset has.

Every query's answer is deterministic as a multiset of rows, as the comparison with vanilla
Spark needs: ORDER BY ... LIMIT orders by every projected column (all scalar), so rows tied in
the order are equal, and the only rows a LIMIT may cut either way differ in the sign of a zero
double, which the comparison ignores (-0.0 = 0.0, as Spark orders them); window functions are
aggregates over a partition, rank() and dense_rank() (equal ranks for ties), no row_number(),
and sums only of integers and decimals."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from pyspark.sql import Window
from pyspark.sql import functions as F

from tests.fuzz.data import PARTITION, SCALARS, Dataset
from tests.fuzz.preds import Pred, PredicateGenerator

# filters and projections, the cheapest to run, are the most common
SHAPES = ["select"] * 6 + ["agg", "join", "union", "in", "exists", "semi"]
# Shapes added later, each as likely: a query drawn from SHAPES becomes one of these with
# probability LATER_SHARE, keeping its API, filter on ``t`` and (fitted) columns.
LATER_SHAPES = ("outer", "setop", "topn", "window")
LATER_SHARE = 0.25
JOIN_KEYS = ["k"]
GROUPED_DOUBLES = ["n.z.w"]   # the double columns aggregates group by (where a dataset has them)
OUTER_JOINS = ("LEFT", "RIGHT", "FULL")
# Set operators with the DataFrame call of each (``{}``: the second operand).
SET_OPERATORS = {"UNION": "union({}).distinct()", "INTERSECT": "intersect({})",
                 "INTERSECT ALL": "intersectAll({})", "EXCEPT": "subtract({})",
                 "EXCEPT ALL": "exceptAll({})"}
# Sort orders of an ORDER BY column; the DataFrame method of each is its lowercase snake form.
DIRECTIONS = ("ASC NULLS FIRST", "ASC NULLS LAST", "DESC NULLS FIRST", "DESC NULLS LAST")
LIMITS = (1, 2, 5, 10, 30, 100, 1000)
FILTERS = ("pred", "pred2")   # the Query fields holding filters


@dataclass(frozen=True)
class Query:
    """A query: its ``shape``, ``api`` (``sql`` or ``df``), projected ``columns`` of ``t``
    (and ``other`` of ``u``), filters ``pred`` on ``t`` and ``pred2`` on ``u`` (on the
    second operand, ``t`` or ``u``, of a union or set operation), the grouping column of an
    aggregate (the partitioning column of window functions), and for the later shapes: the
    outer join type or set operator ``variant``, the set operation's second view ``right``,
    the filters (field names) an outer join has in its ON clause (the others in WHERE), the
    sort ``order`` of each of ``columns`` (ORDER BY, window ORDER BY) and the ``limit``."""

    shape: str
    api: str
    columns: tuple
    pred: Pred | None
    other: tuple = ()
    pred2: Pred | None = None
    group: str = ""
    variant: str = ""
    right: str = ""
    on: tuple = ()
    order: tuple = ()
    limit: int = 0

    def sql(self) -> str:
        """The query as Spark SQL over the views ``t`` and ``u``."""
        if self.shape in LATER_SHAPES:
            return getattr(self, f"_{self.shape}_sql")()
        where, where2 = _where(self.pred), _where(self.pred2)
        cols = self._cols_sql()
        if self.shape == "select":
            return f"SELECT {cols} FROM t{where}"
        if self.shape == "agg":
            measures = ", ".join(f"{e} AS {a}" for e, a in _aggregates(self.columns))
            return (f"SELECT t.{self.group} AS g, {measures} FROM t{where} "
                    f"GROUP BY t.{self.group}")
        if self.shape == "join":
            conds = " AND ".join(p.sql() for p in (self.pred, self.pred2) if p)
            return (f"SELECT {self._joined_sql()} FROM t JOIN u ON t.k = u.k"
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

    def _cols_sql(self, alias: str = "t") -> str:
        return ", ".join(f"{alias}.{c}" for c in self.columns) or "1 AS one"

    def _joined_sql(self) -> str:
        return ", ".join([self._cols_sql()] + [f"u.{c}" for c in self.other])

    def _outer_filters(self) -> tuple[list[str], list[str]]:
        """The SQL of the outer join's filters in its ON clause and in its WHERE clause."""
        placed = {"on": [], "where": []}
        for name in FILTERS:
            pred = getattr(self, name)
            if pred:
                placed["on" if name in self.on else "where"].append(pred.sql())
        return placed["on"], placed["where"]

    def _outer_sql(self) -> str:
        on, where = self._outer_filters()
        return (f"SELECT {self._joined_sql()} FROM t {self.variant} OUTER JOIN u ON "
                + " AND ".join(["t.k = u.k"] + on)
                + (f" WHERE {' AND '.join(where)}" if where else ""))

    def _setop_sql(self) -> str:
        return (f"SELECT {self._cols_sql()} FROM t{_where(self.pred)} {self.variant} "
                f"SELECT {self._cols_sql(self.right)} FROM {self.right}{_where(self.pred2)}")

    def _order_sql(self) -> str:
        return ", ".join(f"t.{c} {o}" for c, o in zip(self.columns, self.order))

    def _topn_sql(self) -> str:
        return (f"SELECT {self._cols_sql()} FROM t{_where(self.pred)} "
                f"ORDER BY {self._order_sql()} LIMIT {self.limit}")

    def _window_sql(self) -> str:
        partition = f"PARTITION BY t.{self.group}"
        ordered = f"{partition} ORDER BY {self._order_sql()}"
        functions = [f"{e} OVER ({partition}) AS w_{a}" for e, a in _aggregates(self.columns)]
        functions += [f"{f}() OVER ({ordered}) AS w_{f}" for f in ("rank", "dense_rank")]
        return f"SELECT {self._cols_sql()}, {', '.join(functions)} FROM t{_where(self.pred)}"

    def dataframe_code(self) -> str:
        """Python code (over ``spark``, ``F`` and ``Window``) building the query with the
        DataFrame API over the views ``t`` and ``u``, as an expression."""
        if self.shape in LATER_SHAPES:
            return getattr(self, f"_{self.shape}_code")()
        t_filtered = _filtered_code("t", self.pred)
        u_filtered = _filtered_code("u", self.pred2)
        cols = self._cols_code()
        if self.shape == "select":
            return f"{t_filtered}.select({cols})"
        if self.shape == "agg":
            measures = ", ".join(f"F.expr({e!r}).alias({a!r})"
                                 for e, a in _aggregates(self.columns))
            return (f"{t_filtered}.groupBy(F.expr({'t.' + self.group!r}).alias('g'))"
                    f".agg({measures})")
        if self.shape == "join":
            return (f"{t_filtered}.join({u_filtered}, F.expr('t.k = u.k'))"
                    f".select({self._joined_code()})")
        if self.shape == "union":
            second = _filtered_code("t", self.pred2)
            return f"{t_filtered}.select({cols}).unionAll({second}.select({cols}))"
        keys = f"{u_filtered}.select(F.col('u.k').alias('key'))"
        if self.shape == "in":
            return f"{t_filtered}.join({keys}, F.expr('t.k = key'), 'left_semi').select({cols})"
        if self.shape == "exists":
            return f"{t_filtered}.join({u_filtered}, F.expr('u.k = t.k'), 'left_semi').select({cols})"
        return (f"{t_filtered}.join({keys}, F.expr('t.k = key OR key IS NULL OR t.k IS NULL'), "
                f"'left_anti').select({cols})")

    def _cols_code(self, alias: str = "t") -> str:
        return (", ".join(f"F.expr({alias + '.' + c!r})" for c in self.columns)
                or 'F.lit(1).alias("one")')

    def _joined_code(self) -> str:
        return self._cols_code() + "".join(f", F.expr({'u.' + c!r})" for c in self.other)

    def _outer_code(self) -> str:
        on, where = self._outer_filters()
        joined = (f"{_view_code('t')}.join({_view_code('u')}, "
                  f"F.expr({' AND '.join(['t.k = u.k'] + on)!r}), {self.variant.lower()!r})")
        if where:
            joined += f".filter(F.expr({' AND '.join(where)!r}))"
        return f"{joined}.select({self._joined_code()})"

    def _setop_code(self) -> str:
        second = f"{_filtered_code(self.right, self.pred2)}.select({self._cols_code(self.right)})"
        return (f"{_filtered_code('t', self.pred)}.select({self._cols_code()})."
                + SET_OPERATORS[self.variant].format(second))

    def _order_code(self) -> str:
        return ", ".join(f"F.expr({'t.' + c!r}).{o.lower().replace(' ', '_')}()"
                         for c, o in zip(self.columns, self.order))

    def _topn_code(self) -> str:
        # ordered before the projection: the sort refers to the view's columns
        return (f"{_filtered_code('t', self.pred)}.orderBy({self._order_code()})"
                f".select({self._cols_code()}).limit({self.limit})")

    def _window_code(self) -> str:
        partition = f"Window.partitionBy(F.expr({'t.' + self.group!r}))"
        ordered = f"{partition}.orderBy({self._order_code()})"
        functions = [f"F.expr({e!r}).over({partition}).alias('w_{a}')"
                     for e, a in _aggregates(self.columns)]
        functions += [f"F.{f}().over({ordered}).alias('w_{f}')" for f in ("rank", "dense_rank")]
        return (f"{_filtered_code('t', self.pred)}"
                f".select({self._cols_code()}, {', '.join(functions)})")

    def build(self, spark):
        """The DataFrame of this query in its ``api``."""
        if self.api == "sql":
            return spark.sql(self.sql())
        return eval(self.dataframe_code(),   # noqa: S307 (own code)
                    {"spark": spark, "F": F, "Window": Window})

    def code(self) -> str:
        """Python code building this query's DataFrame (over ``spark``, ``F`` and ``Window``)."""
        return f"spark.sql({self.sql()!r})" if self.api == "sql" else self.dataframe_code()

    def smaller(self):
        """Simpler queries to try when minimizing: fewer predicates, fewer columns (each
        dropped with its sort order)."""
        for field in FILTERS:
            pred = getattr(self, field)
            if pred is None:
                continue
            yield replace(self, **{field: None})
            for smaller in pred.smaller():
                yield replace(self, **{field: smaller})
        for i in range(len(self.columns)):
            if len(self.columns) > 1:
                yield replace(self, columns=_without(self.columns, i),
                              order=_without(self.order, i))
        for i in range(len(self.other)):
            yield replace(self, other=_without(self.other, i))
        if self.api == "df":
            yield replace(self, api="sql")


def _without(values: tuple, i: int) -> tuple:
    return values[:i] + values[i + 1:]


def _where(pred: Pred | None) -> str:
    """The WHERE clause of ``pred`` (empty without it)."""
    return f" WHERE {pred.sql()}" if pred else ""


def _view_code(view: str) -> str:
    return f'spark.table("{view}").alias("{view}")'


def _filtered_code(view: str, pred: Pred | None) -> str:
    """DataFrame code of the view filtered by ``pred`` (the view alone without it)."""
    return f"{_view_code(view)}.filter(F.expr({pred.sql()!r}))" if pred else _view_code(view)


def _aggregates(columns: tuple) -> list[tuple[str, str]]:
    """(expression, alias) of aggregates over ``t``'s ``columns``: count(*); count of each
    column, min and max of a scalar one (not boolean), sum of an integer or decimal one."""
    out = [("count(*)", "n")]
    for c in columns:
        alias = c.replace(".", "_")
        out.append((f"count(t.{c})", f"c_{alias}"))
        if c in SCALARS and SCALARS[c] not in ("boolean",):
            out += [(f"min(t.{c})", f"lo_{alias}"), (f"max(t.{c})", f"hi_{alias}")]
        if c in SCALARS and SCALARS[c] in ("int", "long", "decimal"):
            out.append((f"sum(t.{c})", f"sum_{alias}"))
    return out


def random_query(rng: random.Random, t: Dataset, u: Dataset, t_focus: tuple = (),
                 u_focus: tuple = (), t_covered: tuple = ()) -> Query:
    """A random query over the datasets ``t`` and ``u``, filtering more often on the
    ``focus`` columns of each and often projecting only ``t_covered`` columns (those a
    covering index holds). A query of :data:`SHAPES` is drawn first; with probability
    :data:`LATER_SHARE` it then becomes one of :data:`LATER_SHAPES` (so that the other
    queries of a seed are those drawn before these shapes were added)."""
    gen_t = PredicateGenerator(rng, t, "t", t_focus)
    gen_u = PredicateGenerator(rng, u, "u", u_focus)
    query = _first_query(rng, t, u, gen_t, gen_u, t_covered)
    if rng.random() >= LATER_SHARE:
        return query
    return _later_query(rng, query, t, u, gen_t, gen_u)


def _first_query(rng: random.Random, t: Dataset, u: Dataset, gen_t: PredicateGenerator,
                 gen_u: PredicateGenerator, t_covered: tuple) -> Query:
    """A random query of one of :data:`SHAPES`."""
    shape = rng.choice(SHAPES)
    api = "df" if rng.random() < 0.4 else "sql"
    columns = _columns(rng, t)
    if t_covered and rng.random() < 0.5:
        columns = tuple(rng.sample(t_covered, rng.randint(1, min(4, len(t_covered)))))
    pred = gen_t.tree() if rng.random() < 0.85 else None
    if shape == "agg":
        group = _group_column(rng, t)
        return Query("agg", api, tuple(rng.sample(list(t.columns.scalars), rng.randint(0, 3))),
                     pred, group=group)
    if shape == "select":
        return Query("select", api, columns, pred)
    if shape == "union":
        return Query("union", api, columns, pred, pred2=gen_t.tree() if rng.random() < 0.8 else None)
    pred2 = gen_u.tree() if rng.random() < 0.6 else None
    other = _other_columns(rng, u) if shape == "join" else ()
    return Query(shape, api, columns, pred, other=other, pred2=pred2)


def _later_query(rng: random.Random, query: Query, t: Dataset, u: Dataset,
                 gen_t: PredicateGenerator, gen_u: PredicateGenerator) -> Query:
    """A random query of one of :data:`LATER_SHAPES` with the API and filter on ``t`` of
    ``query`` and its columns (fitted to the shape)."""
    shape = rng.choice(LATER_SHAPES)
    base = Query(shape, query.api, query.columns or _columns(rng, t), query.pred)
    if shape == "outer":
        pred2 = gen_u.tree() if rng.random() < 0.6 else None
        return replace(base, variant=rng.choice(OUTER_JOINS), other=_other_columns(rng, u),
                       pred2=pred2, on=tuple(f for f in FILTERS if rng.random() < 0.4))
    if shape == "setop":
        right = rng.choice(["t", "u"])
        gen = gen_t if right == "t" else gen_u
        columns = (tuple(c for c in base.columns if c not in t.columns.maps) or ("k",)
                   if right == "t" else _shared_columns(rng, t, u))
        return replace(base, variant=rng.choice(list(SET_OPERATORS)), right=right,
                       columns=columns, pred2=gen.tree() if rng.random() < 0.8 else None)
    columns = _orderable(rng, base.columns, t)
    base = replace(base, columns=columns, order=tuple(rng.choice(DIRECTIONS) for _ in columns))
    if shape == "topn":
        return replace(base, limit=rng.choice(LIMITS))
    return replace(base, group=_group_column(rng, t))


def _columns(rng: random.Random, dataset: Dataset) -> tuple:
    """Columns of ``dataset`` to project: all top-level ones or a few of any kind."""
    columns = dataset.columns
    pool = [*columns.scalars, *columns.structs, *columns.collections] + (
        [PARTITION] if dataset.partitioned else [])
    if rng.random() < 0.1:
        return columns.top_level
    return tuple(rng.sample(pool, rng.randint(1, 5)))


def _other_columns(rng: random.Random, u: Dataset) -> tuple:
    """Zero to three columns of ``u`` to project next to ``t``'s in a join."""
    return _columns(rng, u)[:rng.randint(0, 3)]


def _group_column(rng: random.Random, t: Dataset) -> str:
    """A scalar column of ``t`` to group or partition by: not a double, but for
    :data:`GROUPED_DOUBLES`."""
    scalars = t.columns.scalars
    return rng.choice([c for c in scalars if scalars[c] != "double"]
                      + [c for c in GROUPED_DOUBLES if c in scalars])


def _shared_columns(rng: random.Random, t: Dataset, u: Dataset) -> tuple:
    """``k`` and zero to three other scalar columns both datasets have (of the same types)."""
    shared = [c for c in t.columns.scalars if c in u.columns.scalars and c != "k"]
    return ("k",) + tuple(rng.sample(shared, rng.randint(0, 3)))


def _orderable(rng: random.Random, columns: tuple, t: Dataset) -> tuple:
    """The scalar ones of ``columns`` (fields of structs and the partition column included),
    or one to three random scalar columns of ``t`` when none is."""
    scalars = [c for c in columns if c in t.columns.scalars or c == PARTITION]
    return tuple(scalars) or tuple(rng.sample(list(t.columns.scalars), rng.randint(1, 3)))
