"""Random filter predicates as trees of SQL text (AND/OR/NOT over leaves) that the minimizer
can prune: comparisons, null-safe equality, ranges, IN with nulls, LIKE, rlike, casts and
arithmetic over a dataset's columns, its nested fields (where its format has them) and JSON
paths; over its arrays and map (where its format has them) membership, sizes, elements, map
lookups and higher-order functions; with literals taken from the data."""
from __future__ import annotations

import datetime as dt
import random
import re
from dataclasses import dataclass
from decimal import Decimal

from tests.fuzz.data import DOUBLES, MAP_KEYS, PARTITION, SCALARS, STRINGS, ZONES, Dataset

# Where each scalar column sits in a generated row (see data.SCHEMA; a row of a dataset without
# ``n`` ends before it).
POSITIONS = {"id": (0,), "k": (1,), "s": (2,), "d": (3,), "dec": (4,), "ts": (5,), "day": (6,),
             "b": (7,), "j": (8,), "msg": (9,), "n.x": (10, 0), "n.y": (10, 1),
             "n.z.w": (10, 2, 0), "n.z.v": (10, 2, 1), "arr": (11,), "m": (12,), "items": (13,)}


@dataclass(frozen=True)
class Pred:
    """A predicate: ``op`` is ``leaf`` (``text`` is SQL), ``and``, ``or`` or ``not``."""

    op: str
    text: str = ""
    children: tuple = ()

    def sql(self) -> str:
        """The predicate as SQL text."""
        if self.op == "leaf":
            return self.text
        if self.op == "not":
            return f"NOT ({self.children[0].sql()})"
        return "(" + f" {self.op.upper()} ".join(c.sql() for c in self.children) + ")"

    def smaller(self):
        """Simpler predicates to try when minimizing: each child alone, or one child dropped."""
        if self.op == "leaf":
            return
        for child in self.children:
            yield child
        if self.op in ("and", "or") and len(self.children) > 2:
            for i in range(len(self.children)):
                yield Pred(self.op, children=self.children[:i] + self.children[i + 1:])
        for i, child in enumerate(self.children):
            for smaller in child.smaller():
                yield Pred(self.op, children=self.children[:i] + (smaller,) + self.children[i + 1:])


def value_at(row: tuple, column: str):
    """The value of a column (``n.z.w``, ``arr``) in a generated row (None under a null
    struct)."""
    value = row
    for i in POSITIONS[column]:
        if value is None:
            return None
        value = value[i]
    return value


def sql_literal(value, rng: random.Random | None = None) -> str:
    """``value`` as a Spark SQL literal (timestamps sometimes written in another zone)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or str(value) == "-0.0":
            return f"CAST('{value!r}' AS DOUBLE)".replace("inf", "Infinity").replace("nan", "NaN")
        return f"{value!r}D"
    if isinstance(value, Decimal):
        return f"{value}BD"
    if isinstance(value, dt.datetime):
        zone = rng.choice(ZONES) if rng else dt.timezone.utc
        return f"TIMESTAMP'{value.astimezone(zone).isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _like_escape(text: str) -> str:
    return re.sub(r"([%_\\])", r"\\\1", text)


def _substring(rng: random.Random, text: str) -> str:
    if not text:
        return text
    a = rng.randrange(len(text))
    return text[a:a + rng.randint(1, 5)]


class PredicateGenerator:
    """Makes random predicates over the columns of a dataset (only those it has, see
    :attr:`Dataset.columns`) referred to as ``alias.column``, with literals from its rows."""

    def __init__(self, rng: random.Random, dataset: Dataset, alias: str, focus: tuple = ()):
        """``focus``: columns (and ``j`` for JSON paths) that indexes cover, filtered on more
        often so that most queries give the rewrite something to do."""
        self.rng, self.alias, self.focus = rng, alias, tuple(focus)
        self.rows, self.partitioned = dataset.rows, dataset.partitioned
        self.columns = dataset.columns

    def value(self, column: str):
        """A value of ``column`` from the data, sometimes one that is not there."""
        for _ in range(5):
            v = value_at(self.rng.choice(self.rows), column) if self.rows else None
            if v is not None and self.rng.random() < 0.85:
                return v
        return self._other_value(SCALARS[column])

    def _other_value(self, kind: str):
        rng = self.rng
        return {"long": lambda: rng.randint(-5, 1000), "int": lambda: rng.randint(-5, 45),
                "string": lambda: rng.choice(STRINGS), "double": lambda: rng.choice(DOUBLES),
                "decimal": lambda: Decimal(rng.randint(-99999, 99999)).scaleb(-2),
                "timestamp": lambda: dt.datetime(2024, rng.randint(1, 12), 1, tzinfo=dt.timezone.utc),
                "date": lambda: dt.date(2024, rng.randint(1, 12), rng.randint(1, 28)),
                "boolean": lambda: rng.random() < 0.5}[kind]()

    def lit(self, column: str) -> str:
        """A SQL literal of a value of ``column``."""
        return sql_literal(self.value(column), self.rng)

    def tree(self, depth: int = 0) -> Pred:
        """A random predicate: a leaf or AND/OR/NOT of smaller ones."""
        r = self.rng.random()
        if depth >= 3 or r < 0.45:
            return Pred("leaf", self.leaf())
        if r < 0.55:
            return Pred("not", children=(self.tree(depth + 1),))
        op = "and" if r < 0.8 else "or"
        return Pred(op, children=tuple(self.tree(depth + 1) for _ in range(self.rng.randint(2, 3))))

    def leaf(self) -> str:
        """One random comparison over a column, nested field, JSON path or the partition."""
        rng = self.rng
        if self.partitioned and rng.random() < 0.08:
            return rng.choice([f"{self.alias}.{PARTITION} = {rng.randint(0, 2)}",
                               f"{self.alias}.{PARTITION} IN ({rng.randint(0, 2)}, {rng.randint(0, 3)})",
                               f"{self.alias}.{PARTITION} > {rng.randint(0, 2)}"])
        column = rng.choice(self.focus) if self.focus and rng.random() < 0.5 else None
        if column == "j" or (column is None and rng.random() < 0.12):
            return self._json_leaf()
        if column in self.columns.collections or (
                column is None and self.columns.collections and rng.random() < 0.1):
            return self._collection_leaf(column or rng.choice(list(self.columns.collections)))
        if self.columns.structs and rng.random() < 0.05:
            struct = rng.choice(self.columns.structs)
            return rng.choice([f"{self.alias}.{struct} IS NULL", f"{self.alias}.{struct} IS NOT NULL",
                               f"isnull({self.alias}.{struct})"])
        column = column or rng.choice(list(self.columns.scalars))
        ref = f"{self.alias}.{column}"
        kind = SCALARS[column]
        special = {"string": self._string_leaf, "timestamp": self._time_leaf,
                   "date": self._time_leaf, "boolean": self._bool_leaf}.get(kind)
        if kind in ("long", "int", "double", "decimal") and rng.random() < 0.35:
            return self._arith_leaf(ref, column)
        if special and rng.random() < 0.5:
            return special(ref, column)
        return self._compare_leaf(ref, column)

    def _compare_leaf(self, ref: str, column: str) -> str:
        rng = self.rng
        shape = rng.choice(["=", "<=>", "!=", "<", "<=", ">", ">=", "between", "in", "notin",
                            "null", "notnull", "=", "in"])
        if shape == "between":
            a, b = sorted([self.value(column), self.value(column)], key=_order)
            return f"{ref} BETWEEN {sql_literal(a, rng)} AND {sql_literal(b, rng)}"
        if shape in ("in", "notin"):
            values = [self.lit(column) for _ in range(rng.randint(1, 12))]
            if rng.random() < 0.3:
                values.append("NULL")
            return f"{ref} {'NOT ' if shape == 'notin' else ''}IN ({', '.join(values)})"
        if shape == "null":
            return f"{ref} IS NULL"
        if shape == "notnull":
            return f"{ref} IS NOT NULL"
        if shape == "<=>" and rng.random() < 0.2:
            return f"{ref} <=> NULL"
        return f"{ref} {shape} {self.lit(column)}"

    def _arith_leaf(self, ref: str, column: str) -> str:
        rng = self.rng
        v = self.value(column)
        op = rng.choice(["<", ">=", "=", ">"])
        if SCALARS[column] == "double":
            return rng.choice([f"isnan({ref})", f"{ref} = CAST('NaN' AS DOUBLE)",
                               f"{ref} + 1.0D {op} {sql_literal(v, rng)}",
                               f"try_cast({ref} AS INT) {op} {rng.randint(-50, 50)}",
                               f"{ref} = 0.0D", f"{ref} * -1.0D {op} {sql_literal(v, rng)}"])
        if SCALARS[column] == "decimal":
            return rng.choice([f"CAST({ref} AS INT) {op} {rng.randint(-999, 999)}",
                               f"{ref} * 2 {op} {sql_literal(v, rng)}",
                               f"CAST({ref} AS DOUBLE) {op} {rng.uniform(-999, 999):.3f}D"])
        return rng.choice([f"{ref} + 1 {op} {v}", f"{ref} * 2 = {v}", f"{ref} % 3 = {v % 3}",
                           f"CAST({ref} AS STRING) = '{v}'", f"{ref} - 5 {op} {v}",
                           f"CAST({ref} AS DOUBLE) {op} {v}.5D", f"-{ref} {op} {v}"])

    def _string_leaf(self, ref: str, column: str) -> str:
        rng = self.rng
        text = self.value(column)
        text = text if isinstance(text, str) else rng.choice(STRINGS)
        part = _substring(rng, text)
        shape = rng.randrange(12)
        if shape == 0:
            return f"{ref} LIKE {sql_literal(_like_escape(part) + '%')}"
        if shape == 1:
            return f"{ref} LIKE {sql_literal('%' + _like_escape(part) + '%')}"
        if shape == 2:
            return f"{ref} LIKE {sql_literal('%' + _like_escape(part))}"
        if shape == 3:
            pattern = "".join("_" if rng.random() < 0.2 else _like_escape(c) for c in text)
            return f"{ref} {rng.choice(['LIKE', 'ILIKE', 'NOT LIKE'])} {sql_literal(pattern)}"
        if shape == 4:
            return f"lower({ref}) LIKE {sql_literal('%' + _like_escape(part.lower()) + '%')}"
        if shape == 5:
            return f"upper({ref}) = {sql_literal(text.upper())}"
        if shape == 6:
            regex = rng.choice([re.escape(part), "^" + re.escape(part), re.escape(part) + "$",
                                re.escape(part) + ".*" + re.escape(_substring(rng, text)),
                                f"({re.escape(part)}|{re.escape(rng.choice(STRINGS))})",
                                "[a-c]+" + re.escape(part)])
            return f"{ref} RLIKE {sql_literal(regex)}"
        if shape == 7:
            return f"startswith({ref}, {sql_literal(part)})"
        if shape == 8:
            return f"contains({ref}, {sql_literal(part)})"
        if shape == 9:
            return f"length({ref}) {rng.choice(['<', '=', '>'])} {rng.randint(0, 8)}"
        if shape == 10:
            return f"endswith({ref}, {sql_literal(part)})"
        return f"{ref} {rng.choice(['=', '<', '>='])} {sql_literal(text)}"

    def _time_leaf(self, ref: str, column: str) -> str:
        rng = self.rng
        v = self.value(column)
        op = rng.choice(["<", "=", ">=", ">"])
        shapes = [f"year({ref}) {op} {v.year}", f"month({ref}) = {v.month}",
                  f"CAST({ref} AS DATE) {op} DATE'{v.isoformat()[:10]}'",
                  f"{ref} {op} {sql_literal(v, rng)}",
                  f"date_trunc('MONTH', {ref}) = date_trunc('MONTH', {sql_literal(v, rng)})"]
        if SCALARS[column] == "timestamp":
            shapes += [f"hour({ref}) = {v.hour}", f"CAST({ref} AS STRING) LIKE '{v.year}%'",
                       f"{ref} > {sql_literal(v, rng)} - INTERVAL 1 DAY"]
        else:
            shapes += [f"date_add({ref}, 3) {op} {sql_literal(v, rng)}"]
        return rng.choice(shapes)

    def _bool_leaf(self, ref: str, column: str) -> str:
        return self.rng.choice([ref, f"NOT {ref}", f"{ref} = true", f"{ref} <=> false",
                                f"{ref} IS NULL", f"CAST({ref} AS INT) = 1"])

    def _element(self, column: str):
        """An element of the array ``column`` (a value of the map ``m``, a ``q`` of
        ``items``) from the data, sometimes one that is not there."""
        for _ in range(5):
            found = value_at(self.rng.choice(self.rows), column) if self.rows else None
            if found:
                values = list(found.values()) if isinstance(found, dict) else found
                value = self.rng.choice(values)
                value = value[0] if isinstance(value, tuple) else value
                if value is not None and self.rng.random() < 0.85:
                    return value
        return self.rng.randint(-3, 14)

    def _collection_leaf(self, column: str) -> str:
        """A comparison over the array or map ``column``."""
        rng = self.rng
        ref, v = f"{self.alias}.{column}", self._element(column)
        op = rng.choice(["=", "<", ">=", ">", "<=>", "!="])
        common = [f"{ref} IS NULL", f"{ref} IS NOT NULL", f"size({ref}) {op} {rng.randint(0, 3)}",
                  f"cardinality({ref}) = {rng.randint(0, 3)}"]
        if column == "arr":
            shapes = [f"array_contains({ref}, {v})", f"get({ref}, {rng.randint(0, 2)}) {op} {v}",
                      f"exists({ref}, x -> x > {v})", f"forall({ref}, x -> x IS NULL OR x < {v})",
                      f"array_max({ref}) {op} {v}", f"NOT array_contains({ref}, {v})",
                      f"try_element_at({ref}, {rng.choice([1, -1, 3])}) {op} {v}",
                      f"{ref} = array({v}, {self._element(column)})",
                      f"array_position({ref}, {v}) = 1"]
        elif column == "m":
            key = sql_literal(rng.choice(MAP_KEYS))
            shapes = [f"{ref}[{key}] {op} {v}", f"{ref}[{key}] IS NULL",
                      f"map_contains_key({ref}, {key})", f"element_at({ref}, {key}) IN ({v}, 1)",
                      f"array_contains(map_keys({ref}), {key})",
                      f"array_contains(map_values({ref}), {v})"]
        else:
            text = self.value("s") if "s" in self.columns.scalars else rng.choice(STRINGS)
            prefix = sql_literal(_like_escape(_substring(rng, text or "a")) + "%")
            shapes = [f"exists({ref}, x -> x.q = {v})", f"array_contains({ref}.q, {v})",
                      f"get({ref}, 0).q {op} {v}", f"get({ref}, 0).r = {sql_literal(text)}",
                      f"exists({ref}, x -> x.r LIKE {prefix})",
                      f"forall({ref}, x -> x.q IS NOT NULL)"]
        return rng.choice(shapes + common)

    def _json_leaf(self) -> str:
        rng = self.rng
        j = f"{self.alias}.j"
        return rng.choice([
            f"get_json_object({j}, '$.a') = '{rng.randint(-5, 20)}'",
            f"cast(get_json_object({j}, '$.a') as int) {rng.choice(['<', '>=', '='])} {rng.randint(-5, 20)}",
            f"get_json_object({j}, '$.b') = {sql_literal(rng.choice(STRINGS))}",
            f"get_json_object({j}, '$.b') LIKE {sql_literal('%' + _like_escape(_substring(rng, rng.choice(STRINGS))) + '%')}",
            f"get_json_object({j}, '$.c.d') IS NULL",
            f"cast(get_json_object({j}, '$.c.d') as double) {rng.choice(['<', '>', '='])} {rng.choice(['1.5D', '0.0D', '-2.0D'])}",
            f"get_json_object({j}, '$.a') IN ('1', '2', '3', NULL)",
        ])


def _order(value):
    if isinstance(value, float) and value != value:
        return (1, 0)
    return (0, value)
