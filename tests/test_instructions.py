"""Instructions, engine index names and the precedence NEVER > user > engine, without a JVM."""
from __future__ import annotations

import pytest

from rules.instructions import Instruction, engine_index_name, from_user_rule, merge
from rules.terms import Priority
from rules.user_rules import load_rules

RULES = load_rules("\n".join([
    "version: 1",
    "rules:",
    "  - {source: /lake/events, kind: bloom, columns: [trace_id], priority: ALWAYS}",
    "  - {source: /lake/raw/*, kind: cache, columns: [ts], ttl: PT36H}",
    "  - {source: /lake/archive/*, priority: NEVER}",
]), "rules.yaml")


def test_engine_names_are_predictable_unique_and_sanitized():
    a = engine_index_name("bloom", "hdfs://nn/lake/events", ["user.id"])
    assert a == engine_index_name("bloom", "file:/lake/events/", ["user.id"])
    assert a.startswith("auto_bloom_events_") and a.endswith("_user_id")
    assert a != engine_index_name("bloom", "/other/events", ["user.id"])
    assert engine_index_name("minmax", "/", ["a-b c"]).startswith("auto_minmax_root_")


def test_user_rules_become_instructions():
    bloom, cache, never = RULES.rules
    i = from_user_rule(bloom, "file:/lake/events")
    assert (i.action, i.kind, i.columns, i.priority, i.origin) == (
        "create", "bloom", ("trace_id",), Priority.ALWAYS, "user")
    assert i.name.startswith("auto_bloom_events_") and i.reason == "user rule at rules.yaml:3"
    c = from_user_rule(cache, "file:/lake/raw/eu")
    assert (c.action, c.name, c.ttl_seconds) == ("cache", None, 36 * 3600)
    assert from_user_rule(never, "file:/lake/archive/2019") is None


def test_never_beats_user_beats_engine():
    user = [from_user_rule(RULES.rules[0], "file:/lake/events")]
    engine = [
        Instruction("create", "bloom", "file:/lake/events", ("trace_id",), score=9.0),  # dup
        Instruction("drop", "bloom", "file:/lake/events", ("trace_id",),
                    name=user[0].name),                                    # the user's index
        Instruction("create", "minmax", "file:/lake/archive/2019", ("ts",)),   # NEVER
        Instruction("cache", "cache", "hdfs://nn/lake/archive/2020", ("ts",)),  # NEVER
        Instruction("create", "minmax", "file:/lake/events", ("ts",)),         # kept
        Instruction("drop", "covering", "file:/lake/events", ("x",), name="by_hand"),
        Instruction("drop", "covering", "file:/lake/events", ("y",), name="auto_covering_e"),
    ]
    kept = merge(user, engine, RULES, engine_indexes=["auto_covering_e"])
    assert [(i.action, i.kind, i.columns, i.origin) for i in kept] == [
        ("create", "bloom", ("trace_id",), "user"),
        ("create", "minmax", ("ts",), "engine"),
        ("drop", "covering", ("y",), "engine"),
    ]


def test_a_user_rule_and_the_engine_on_the_same_source_give_one_cache_or_index():
    """The user caches /lake/raw/eu's ts and the engine would cache ts and msg; the user keys
    a covering index on id including a, the engine on id including a and b: the user's win,
    alone; an index of another kind or key is still the engine's to add."""
    rules = load_rules("\n".join([
        "version: 1", "rules:",
        "  - {source: /lake/raw/eu, kind: cache, columns: [ts]}",
        "  - {source: /lake/t, kind: covering, columns: [id], includedColumns: [a]}",
    ]), "rules.yaml")
    user = [from_user_rule(rules.rules[0], "file:/lake/raw/eu"),
            from_user_rule(rules.rules[1], "file:/lake/t")]
    engine = [Instruction("cache", "cache", "hdfs://nn/lake/raw/eu", ("msg", "ts")),
              Instruction("create", "covering", "file:/lake/t", ("id",), ("a", "b")),
              Instruction("create", "covering", "file:/lake/t", ("k",), ("id",)),
              Instruction("create", "minmax", "file:/lake/t", ("id",))]
    kept = merge(user, engine, rules)
    assert [(i.action, i.kind, i.columns, i.included_columns, i.origin) for i in kept] == [
        ("cache", "cache", ("ts",), (), "user"),
        ("create", "covering", ("id",), ("a",), "user"),
        ("create", "covering", ("k",), ("id",), "engine"),
        ("create", "minmax", ("id",), (), "engine")]


def test_bad_instructions_are_refused():
    with pytest.raises(ValueError, match="unknown action 'build'"):
        Instruction("build", "bloom", "/a", ("x",))
    with pytest.raises(ValueError, match="unknown origin 'admin'"):
        Instruction("create", "bloom", "/a", ("x",), origin="admin")
