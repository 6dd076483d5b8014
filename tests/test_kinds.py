"""The registry of acceleration kinds and the pure decisions taken out of the rewriter: which
verdict serves a relation, when the join rule stands back, in how many partitions a join reads
buckets, and the per-version cache. No JVM."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from accelerator.query.indexed_roots import RootUse
from indexes import kinds
from indexes.covering.bucket_count import default_num_buckets
from indexes.covering.config import CoveringIndexConfig
from indexes.covering.join_match import (JoinApplicable, join_obstacle, join_partitions,
                                         pairable)
from indexes.covering.match import Applicable
from indexes.description import SourceDescription
from indexes.errors import InvalidIndexConfigError
from indexes.kind import Serving
from indexes.skipping.config import DataSkippingIndexConfig, MinMaxSketch
from indexes.skipping.match import Pruning
from indexes.source import NotApplicable
from indexes.text.config import TextIndexConfig
from indexes.text.match import TextPruning
from indexes.version_cache import VersionCache
from rules.user_rules import RULE_KINDS


def entry(name, kind, size=100, files=None, buckets=8, entry_id=1, timestamp=1, path=None):
    return SimpleNamespace(
        name=name, kind=kind, id=entry_id, timestamp=timestamp, config={"numBuckets": buckets},
        source=SourceDescription.from_json({"files": files or [["/src/a", 100_000_000, 1]]}),
        content={"sizeInBytes": size, "path": path or f"/sys/{name.lower()}/v__=0"})


COVERING, SKIPPING, TEXT = (k.name for k in kinds.KINDS)


def covering(name, size=100, point_lookup=False, **kw):
    return Applicable(entry(name, COVERING, size, **kw), [], False, point_lookup=point_lookup)


def pruning(name, kept_bytes, cls=Pruning, kind=SKIPPING):
    return cls(entry(name, kind), ["/src/a"], 10, 1000, kept_bytes, 0)


def test_every_kind_is_registered_once_with_its_config_type():
    assert [k.display_name for k in kinds.KINDS] == [
        "CoveringIndex", "DataSkippingIndex", "TextIndex"]
    assert len({k.name for k in kinds.KINDS}) == len(kinds.KINDS)
    assert kinds.kind_for_config(CoveringIndexConfig("c", ["a"])).name == COVERING
    assert kinds.kind_for_config(
        DataSkippingIndexConfig("s", MinMaxSketch("a"))).serving is Serving.PRUNE
    assert kinds.kind_for_config(TextIndexConfig("t", "a")).name == TEXT
    assert kinds.kind_of(SimpleNamespace(kind="nope")) is None


def test_each_index_kind_of_the_rule_engine_is_answered_by_one_kind():
    answered = [e for k in kinds.KINDS for e in k.engine_kinds]
    assert sorted(answered) == sorted(set(RULE_KINDS) - {"cache"})
    assert kinds.kind_for_engine("bloom").name == SKIPPING
    assert kinds.kind_for_engine("cache") is None
    skipping = kinds.kind_for_engine("minmax")
    assert skipping.config_for("bloom", "b", ["id"], [], 600).sketches[0] \
        .expectedDistinctCountPerFile == 1200
    assert skipping.config_for("bloom", "b", ["id"], [], 0).sketches[0] \
        .expectedDistinctCountPerFile == 1000
    assert skipping.config_for("bloom", "b", ["id"], [], None).sketches[0] \
        .expectedDistinctCountPerFile == 100_000
    assert type(skipping.config_for("valuelist", "v", ["id"], [], None).sketches[0]).kind \
        == "ValueList"
    logged = SimpleNamespace(config={"sketches": [{"kind": "BloomFilter", "expression": "id"},
                                                  {"kind": "MinMax", "expression": "ts"}]})
    assert skipping.engine_targets(logged) == [("bloom", ("id",)), ("minmax", ("ts",))]
    covering_ = kinds.kind_for_engine("covering").config_for("covering", "c", ["a"], ["b"], 5)
    assert (covering_.indexedColumns, covering_.includedColumns) == (["a"], ["b"])
    assert kinds.kind_for_engine("text").config_for("text", "t", ["msg"], [], None).column \
        == "msg"


def test_every_spelling_of_a_kind_names_it_and_listings_keep_the_display_name():
    for spelling in ("covering", "CoveringIndex", "coveringindex"):
        assert kinds.canonical_kind(spelling).name == COVERING
    for spelling in ("DataSkippingIndex", "skipping", "SKIPPING"):
        assert kinds.canonical_kind(spelling).name == SKIPPING
    for spelling in ("TextIndex", "text"):
        assert kinds.canonical_kind(spelling).name == TEXT
    assert kinds.canonical_kind("bloom") is None   # a rule-engine kind: kind_for_engine
    assert kinds.display_name(SimpleNamespace(kind=COVERING)) == "CoveringIndex"
    assert kinds.display_name(SimpleNamespace(kind="FutureIndex")) == "FutureIndex"


def test_optimize_accepts_the_modes_of_the_kinds_that_compact():
    assert kinds.optimize_modes() == ("quick", "full")
    assert [k.compacts for k in kinds.KINDS] == [True, False, False]


def test_a_non_config_is_rejected_naming_the_accepted_types():
    with pytest.raises(InvalidIndexConfigError,
                       match="expects an IndexConfig.*DataSkippingIndexConfig or "
                             "TextIndexConfig, got dict"):
        kinds.kind_for_config({"indexName": "x"})


def test_a_covering_index_wins_over_pruning_indexes():
    verdicts = [pruning("s", 1), covering("c", size=10**9)]
    assert kinds.choose(verdicts).index.name == "c"


def test_among_pruning_kinds_the_fewest_kept_bytes_win():
    text = pruning("t", 200, TextPruning, TEXT)
    assert kinds.choose([pruning("s", 500), text]).index.name == "t"
    assert kinds.choose([pruning("s", 100), text]).index.name == "s"


def test_among_covering_indexes_a_point_lookup_then_the_smallest_wins():
    assert kinds.choose([covering("big", 500), covering("small", 50)]).index.name == "small"
    assert kinds.choose([covering("small", 50),
                         covering("lookup", 500, point_lookup=True)]).index.name == "lookup"


def test_no_applicable_verdict_chooses_nothing():
    e = entry("c", COVERING)
    assert kinds.choose([NotApplicable(e, "NO_FILTER", "x")]) is None
    assert kinds.choose([]) is None


def test_the_join_rule_stands_back_for_the_documented_reasons():
    big = [entry("l", COVERING)], [entry("r", COVERING)]
    none = (None, None)
    assert join_obstacle("", none, big, True, 10 << 20) is None
    assert "bucketing.enabled is false" in join_obstacle("", none, big, False, 10 << 20)
    assert "broadcast" in join_obstacle("BROADCAST(r)", none, big, True, 10 << 20)
    small = [entry("l", COVERING, files=[["/src/a", 1000, 1]])], big[1]
    assert "within spark.sql.autoBroadcastJoinThreshold" in join_obstacle(
        "", none, small, True, 10 << 20)
    assert join_obstacle("", none, small, True, -1) is None     # never broadcast by size
    lookup = (covering("l", point_lookup=True), None)
    assert "looks the rows up" in join_obstacle("", lookup, big, True, 10 << 20)


def test_join_partitions_group_many_buckets_unless_rows_are_added_to_them():
    left, right = covering("l", size=1 << 20, buckets=200), covering("r", size=1 << 20,
                                                                    buckets=200)
    assert join_partitions(JoinApplicable(left, right), cores=2) == 8   # a divisor of 200
    appended = Applicable(left.index, [], False, appended=("/src/new",))
    assert join_partitions(JoinApplicable(appended, right), cores=2) == 200
    few = covering("l", buckets=8), covering("r", buckets=8)
    assert join_partitions(JoinApplicable(*few), cores=2) == 8
    # counts that divide one another: the smaller count's groups (or its divisor)
    assert join_partitions(JoinApplicable(covering("l", buckets=16), few[1]), cores=2) == 8
    assert join_partitions(JoinApplicable(covering("l", buckets=128),
                                          covering("r", buckets=64)), cores=2) == 8


def test_pairable_bucket_counts_divide_one_another_unless_rows_are_added():
    assert pairable(covering("l", buckets=8), covering("r", buckets=8))
    assert pairable(covering("l", buckets=2), covering("r", buckets=16))
    assert pairable(covering("l", buckets=6), covering("r", buckets=3))
    assert not pairable(covering("l", buckets=4), covering("r", buckets=3))
    appended = Applicable(entry("l", COVERING, buckets=16), [], False, appended=("/src/new",))
    assert not pairable(appended, covering("r", buckets=8))
    assert pairable(appended, covering("r", buckets=16))     # the bucket union needs equal counts


def test_default_bucket_count():
    mb = 1 << 20
    assert default_num_buckets(0, 200) == 1
    assert default_num_buckets(900 << 10, 200) == 1            # under 1 MB: one bucket
    assert default_num_buckets(20 * mb, 8) == 8                # the shuffle partitions...
    assert default_num_buckets(5 * mb, 8) == 4                 # ...while a bucket holds 1 MB
    assert default_num_buckets(20 * mb, 10) == 8               # a power of two
    assert default_num_buckets(300 * mb, 2) == 4               # at most 128 MB a bucket
    assert default_num_buckets(1 << 30, 200) == 128            # at most 128 buckets
    assert default_num_buckets(1 << 40, 8) == 128


def test_version_cache_reloads_a_replaced_version_and_drops_it_on_retain():
    cache = VersionCache(capacity=8)
    v1 = entry("ix", COVERING, entry_id=1, timestamp=10)
    loads = []
    assert cache.get(v1, "rel", lambda: loads.append(1) or "r1") == "r1"
    assert cache.get(v1, "rel", lambda: "never") == "r1" and loads == [1]
    v2 = entry("ix", COVERING, entry_id=3, timestamp=20)
    assert cache.get(v2, "rel", lambda: "r2") == "r2"
    other = entry("other", COVERING)
    cache.get(other, "rel", lambda: "o")
    elsewhere = entry("ix", COVERING, path="/elsewhere/ix/v__=0")
    cache.get(elsewhere, "rel", lambda: "e")
    assert len(cache) == 3
    cache.retain("/sys", [v2])    # 'other' is no longer an ACTIVE index of /sys
    assert len(cache) == 2 and cache.get(v2, "rel", lambda: "reloaded") == "r2"
    cache.retain("/sys", [])
    assert cache.get(elsewhere, "rel", lambda: "never") == "e"   # another system path


def test_version_cache_is_bounded_least_recently_used_first():
    cache = VersionCache(capacity=2)
    a, b, c = (entry(n, COVERING) for n in "abc")
    cache.get(a, "k", lambda: "a")
    cache.get(b, "k", lambda: "b")
    cache.get(a, "k", lambda: "never")      # a is now the most recent
    cache.get(c, "k", lambda: "c")
    assert len(cache) == 2
    assert cache.get(a, "k", lambda: "again") == "a"
    assert cache.get(b, "k", lambda: "b reloaded") == "b reloaded"


def test_version_cache_loads_a_value_once_under_concurrency():
    cache = VersionCache()
    e = entry("ix", COVERING)
    calls = []
    barrier = threading.Barrier(8)

    def load():
        calls.append(1)
        return "v"

    def worker():
        barrier.wait()
        assert cache.get(e, "k", load) == "v"

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]


def test_filter_columns_say_which_filters_an_index_could_serve():
    """What the JVM rule checks before calling the rewriter: a covering index needs its first
    indexed column filtered (top-level name, lower case), a text index its column, a
    data-skipping index a column its sketches read; an unkeyed sketch may serve any filter."""
    def col(*path):
        return {"path": list(path), "name": "__".join(path), "type": "long"}
    by_kind = {k.name: k for k in kinds.KINDS}
    cov = SimpleNamespace(config={"indexedColumns": [col("User", "id"), col("b")],
                                  "includedColumns": [col("c")]})
    assert by_kind[COVERING].filter_columns(cov) == {"user"}
    text = SimpleNamespace(config={"column": "Message", "key": 'col("Message")'})
    assert by_kind[TEXT].filter_columns(text) == {"message"}
    sketches = [{"key": 'GetJsonObject[](col("Payload"),lit(string:"$.t"))'},
                {"key": 'col("user")."id"'}]
    assert by_kind[SKIPPING].filter_columns(SimpleNamespace(config={"sketches": sketches})) \
        == {"payload", "user"}
    unkeyed = SimpleNamespace(config={"sketches": sketches + [{"key": None}]})
    assert by_kind[SKIPPING].filter_columns(unkeyed) is None


def test_root_uses_merge_into_the_jvm_line():
    covering_use = RootUse(False, True, frozenset({"k"}))
    skipping_use = RootUse(True, False, frozenset({"ts", "id"}))
    assert covering_use.merge(skipping_use).line("/lake/t") == "/lake/t\tJ\tid\tk\tts"
    assert skipping_use.line("/lake/t") == "/lake/t\t-\tid\tts"
    cached = RootUse(False, False, None)
    assert cached.merge(covering_use).line("/c") == "/c\tAJ"
    assert cached.merge(covering_use).prunes is False and skipping_use.merge(cached).prunes
