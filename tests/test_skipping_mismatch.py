"""whyNot's type-mismatch verdict without a JVM: which casts of a sketched expression its
statistics cannot answer, and the sentence naming the sketch that would."""
from __future__ import annotations

from indexes.skipping.build import ResolvedSketch
from indexes.skipping.ir import (And, Arith, Cast, Cmp, In, IsNull, Lit, Not, Sketched, StartsWith,
                                  Unknown)
from indexes.skipping.mismatch import mismatch_reason, mismatched_casts, sql_type

PATH = "get_json_object(payload, '$.t')"
TEXT = Sketched("k_text", "string")
NUMBER = Sketched("k_id", "long")
SKETCHES = [ResolvedSketch("MinMax", PATH, {}, "k_text", "string", None),
            ResolvedSketch("BloomFilter", PATH, {}, "k_text", "string", None),
            ResolvedSketch("MinMax", "id", {}, "k_id", "long", ("id",))]


def cast(child, src, dst):
    return Cast(child, src, dst, None, True)


def test_a_string_sketch_cast_to_a_number_anywhere_in_the_filter_is_found():
    to_long = cast(TEXT, "string", "long")
    to_date = cast(TEXT, "string", "date")
    condition = And(Cmp(">=", Arith("+", to_long, Lit(1, "long"), "long", True), Lit(5, "long")),
                    Not(In(to_date, (Lit(1, "date"), Lit(2, "date")))))
    assert mismatched_casts(condition) == [to_long, to_date]


def test_a_number_sketch_cast_to_a_string_is_found():
    to_text = cast(NUMBER, "long", "string")
    assert mismatched_casts(Cmp("=", to_text, Lit("7", "string"))) == [to_text]


def test_casts_the_statistics_answer_or_that_are_not_of_a_sketch_are_not_mismatches():
    assert mismatched_casts(Cmp("=", cast(NUMBER, "long", "double"), Lit(1.0, "double"))) == []
    assert mismatched_casts(Cmp("=", cast(Unknown("string"), "string", "long"), Lit(1, "long"))) == []
    assert mismatched_casts(Cmp("=", TEXT, Lit("7", "string"))) == []
    # under a function the statistics cannot follow (sha2(cast(id as string)) LIKE 'ab%'),
    # a sketch of the cast would not serve either
    hashed = Unknown("string", False, (cast(NUMBER, "long", "string"),))
    assert mismatched_casts(StartsWith(hashed, Lit("ab", "string"))) == []
    assert mismatched_casts(IsNull(cast(TEXT, "string", "long"))) == []
    # a guard re-states the sketched expression itself: its casts are not the filter's
    guarded = Sketched("k_cast", "long", cast(TEXT, "string", "long"), True)
    assert mismatched_casts(Cmp("=", guarded, Lit(1, "long"))) == []


def test_the_reason_names_every_sketch_of_the_expression_and_the_sketch_that_would_serve():
    to_decimal = cast(TEXT, "string", "decimal(10,2)")
    condition = And(Cmp(">=", to_decimal, Lit(45, "decimal(10,2)")),
                    Cmp("<=", to_decimal, Lit(50, "decimal(10,2)")))
    assert mismatch_reason(condition, SKETCHES) == (
        f"the filter casts {PATH} from string to decimal(10,2), but MinMax({PATH}), "
        f"BloomFilter({PATH}) hold string values, whose order is not the order of "
        f"decimal(10,2) values; MinMaxSketch(\"CAST(({PATH}) AS DECIMAL(10,2))\") would serve it")
    both = And(condition, Cmp("=", cast(NUMBER, "long", "string"), Lit("7", "string")))
    assert mismatch_reason(both, SKETCHES).count("would serve it") == 2
    assert 'MinMaxSketch("CAST((id) AS STRING)")' in mismatch_reason(both, SKETCHES)
    assert mismatch_reason(Cmp("=", TEXT, Lit("7", "string")), SKETCHES) is None


def test_sql_type_names():
    assert [sql_type(t) for t in ("long", "integer", "short", "byte", "double", "date",
                                  "decimal(10,2)", "timestamp")] == [
        "BIGINT", "INT", "SMALLINT", "TINYINT", "DOUBLE", "DATE", "DECIMAL(10,2)", "TIMESTAMP"]
