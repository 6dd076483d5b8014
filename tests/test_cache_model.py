"""The cache tier's model without a JVM: priorities, TTL durations, cache keys, entries and the
warm-up merge rule."""
from __future__ import annotations

import pytest

from accelerator.cache.model import (
    CacheEntry,
    CacheKey,
    EntryState,
    Priority,
    format_duration,
    merge_ttl,
    parse_duration,
    parse_priority,
    plan_warmup,
)
from indexes.errors import InvalidIndexConfigError


def entry(key: str = "k1", priority: Priority = Priority.MEDIUM, nbytes: int = 100,
          last_used: float = 0.0, ttl: int | None = None, columns=("a",),
          path: str = "/lake/t/f1.parquet", size: int = 10, mtime: int = 1000,
          **more) -> CacheEntry:
    """An entry with defaults for what a test does not care about (shared by the cache tests):
    packed (tag 1) unless ``tag`` says otherwise."""
    more.setdefault("tag", 1)
    return CacheEntry(key=key, source_root="/lake/t", file_path=path, file_size=size,
                      file_mtime=mtime, columns=tuple(columns), priority=priority,
                      ttl_seconds=ttl, bytes=nbytes, data_path=f"/cache/data/{key}/d0",
                      created=0.0, last_used=last_used, **more)


# ---------------------------------------------------------------- priorities and durations

def test_priorities_order_and_parse_case_insensitively():
    assert Priority.ALWAYS > Priority.HIGH > Priority.MEDIUM > Priority.LOW > Priority.NEVER
    assert parse_priority(" high ") is Priority.HIGH
    assert parse_priority("Always") is Priority.ALWAYS
    assert parse_priority(Priority.LOW) is Priority.LOW
    assert parse_priority("never", allow_never=True) is Priority.NEVER


@pytest.mark.parametrize("value", ["never", "urgent", "", "1"])
def test_bad_priority_names_the_value_and_the_allowed_ones(value):
    with pytest.raises(InvalidIndexConfigError) as err:
        parse_priority(value)
    assert repr(value) in str(err.value)
    assert "ALWAYS, HIGH, MEDIUM, LOW" in str(err.value)
    assert "NEVER" not in str(err.value)


@pytest.mark.parametrize("text, seconds", [
    ("PT30M", 1800), ("P7D", 7 * 86400), ("PT1H30M", 5400), ("P1DT2H", 93600),
    ("pt45s", 45), ("P2W", 14 * 86400), ("PT0S", 0), (" P1DT1H1M1S ", 90061)])
def test_iso_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "PT1H30", "1D", "PT1.5S", "P-1D", "30m"])
def test_bad_durations_are_named(text):
    with pytest.raises(InvalidIndexConfigError, match="invalid TTL") as err:
        parse_duration(text)
    assert repr(text) in str(err.value)


@pytest.mark.parametrize("text", ["P1M", "P1Y", "P1Y2M3D", "P1MT2H"])
def test_months_and_years_are_refused_with_a_hint(text):
    with pytest.raises(InvalidIndexConfigError, match="months and years are not supported"):
        parse_duration(text)


def test_format_duration_round_trips():
    for text in ["PT30M", "P7D", "PT1H30M", "P1DT2H", "PT0S", "P1DT1H1M1S"]:
        assert format_duration(parse_duration(text)) == text


# ---------------------------------------------------------------- keys

def key(**changes) -> CacheKey:
    args = dict(path="/lake/t/f1.csv", size=10, modification_time=1000, format="csv",
                options={"header": "true", "sep": ","}, schema_json='{"type":"struct","fields":[]}',
                read_settings={"spark.sql.caseSensitive": "false"})
    args.update(changes)
    return CacheKey.create(**args)


def test_key_is_stable_sha256_hex():
    assert key().hex == key().hex
    assert len(key().hex) == 64 and int(key().hex, 16) >= 0
    # option order and name case, schema formatting and the format's case do not matter
    assert key(options={"SEP": ",", "Header": "true"}).hex == key().hex
    assert key(schema_json='{"fields": [], "type": "struct"}').hex == key().hex
    assert key(format="CSV").hex == key().hex


@pytest.mark.parametrize("change", [
    {"path": "/lake/t/f2.csv"}, {"size": 11}, {"modification_time": 1001}, {"format": "json"},
    {"options": {"header": "false", "sep": ","}}, {"options": {"header": "true"}},
    {"schema_json": '{"type":"struct","fields":[{"name":"a"}]}'},
    {"read_settings": {"spark.sql.caseSensitive": "true"}}])
def test_a_changed_file_or_read_gives_another_key(change):
    assert key(**change).hex != key().hex


# ---------------------------------------------------------------- entries

def test_entry_normalizes_columns_and_round_trips_json():
    e = entry(columns=("b", "a", "b"), ttl=60, hits=3, retired=[("/old", 5)])
    assert e.columns == ("a", "b")
    back = CacheEntry.from_json(e.to_json())
    assert back == e
    assert back.priority is Priority.MEDIUM and back.state is EntryState.ACTIVE
    gone = CacheEntry.from_json(e.evicted(7.0).to_json())
    assert gone.state is EntryState.EVICTED and gone.evicted_at == 7.0
    assert gone.evicted(9.0) is gone


def test_from_json_ignores_fields_of_newer_versions():
    e = entry()
    assert CacheEntry.from_json(e.to_json()[:-1] + ', "zone": "eu"}') == e


@pytest.mark.parametrize("text", ["{}", "[]", '{"key": "k"}', "not json"])
def test_from_json_refuses_what_is_not_an_entry(text):
    with pytest.raises(ValueError):
        CacheEntry.from_json(text)


def test_entry_refuses_never_and_empty_columns():
    with pytest.raises(InvalidIndexConfigError):
        entry(priority=Priority.NEVER)
    with pytest.raises(InvalidIndexConfigError):
        entry(columns=())


def test_ttl_counts_from_last_use_and_always_never_expires():
    e = entry(ttl=60, last_used=100.0)
    assert not e.expired(159.9)
    assert e.expired(160.0)
    assert not entry(ttl=None, last_used=0.0).expired(1e12)
    assert not entry(ttl=60, priority=Priority.ALWAYS).expired(1e12)


# ---------------------------------------------------------------- the merge rule

def test_merge_ttl_keeps_the_longer():
    assert merge_ttl(60, 30) == 60 and merge_ttl(None, 30) is None and merge_ttl(5, None) is None


def test_first_warmup_writes_the_requested_columns():
    k = key()
    plan = plan_warmup(k, ["b", "a"], Priority.LOW, 60, [])
    assert plan.write and plan.columns == ("a", "b") and plan.keep is None
    assert plan.priority is Priority.LOW and plan.ttl_seconds == 60 and plan.supersedes == ()


def test_covered_request_writes_nothing_and_never_lowers_priority():
    k = key()
    current = entry(k.hex, Priority.HIGH, columns=("a", "b"), ttl=600, path=k.path)
    plan = plan_warmup(k, ["a"], Priority.LOW, 60, [current])
    assert not plan.write and plan.keep == current
    assert plan.priority is Priority.HIGH and plan.ttl_seconds == 600
    raised = plan_warmup(k, ["b"], "always", None, [current])
    assert raised.priority is Priority.ALWAYS and raised.ttl_seconds is None and not raised.write


def test_other_columns_are_written_as_the_union_superseding_the_current_entry():
    k = key()
    current = entry(k.hex, Priority.HIGH, columns=("a", "b"), path=k.path)
    plan = plan_warmup(k, ["c"], Priority.LOW, None, [current])
    assert plan.write and plan.columns == ("a", "b", "c")
    assert plan.priority is Priority.HIGH and plan.supersedes == (current,)


def test_entries_of_a_changed_file_are_superseded_other_reads_of_it_are_kept():
    k = key()
    old_file = entry("old", path=k.path, size=9, mtime=1000)
    other_options = entry("opts", path=k.path, size=k.size, mtime=k.modification_time)
    other_file = entry("f2", path="/lake/t/f2.csv", size=9)
    evicted = entry("gone", path=k.path, size=8, state=EntryState.EVICTED, evicted_at=1.0)
    plan = plan_warmup(k, ["a"], Priority.LOW, None, [old_file, other_options, other_file, evicted])
    assert plan.supersedes == (old_file,)


def test_a_duration_without_its_p_gets_a_hint():
    with pytest.raises(InvalidIndexConfigError, match=r"'45m'.*starts with P.*\(PT45M"):
        parse_duration("45m")
