"""The cache manifest over MemoryFs, without a JVM: commits, races between writers, usage
records, eviction, collection after the grace period and NEVER markers."""
from __future__ import annotations

import sys
import threading
from dataclasses import replace

import pytest

from accelerator.cache.manifest import CacheManifest
from accelerator.cache.model import CacheKey, CacheNeverError, EntryState, Priority, plan_warmup
from accelerator.cache.never import NeverMarkers
from accelerator.cache.policy import check_always_fits, choose_evictions
from indexes.fs import MemoryFs
from tests.fs_doubles import Clock, RacingFs
from tests.test_cache_model import entry

KEY = "a" * 64
OTHER = "b" * 64
CACHE = "memory:///sys/_cache"


@pytest.fixture
def clock():
    return Clock(now=1_000_000)   # MemoryFs modification times, epoch ms


@pytest.fixture
def fs(clock):
    return MemoryFs(clock)


@pytest.fixture
def manifest(fs, clock):
    return CacheManifest(fs, CACHE, clock=lambda: clock.now / 1000.0)


def warmed(manifest, key=KEY, columns=("a",), priority=Priority.MEDIUM, nbytes=100, **more):
    """An entry whose data a warm-up wrote to a fresh data path."""
    data = manifest.new_data_path()
    manifest.fs.write_text(f"{data}/part-0.parquet", "x")
    return replace(entry(key, priority, nbytes, columns=columns, **more), data_path=data)


def names(fs, path):
    return [f.name for f in fs.list(path)]


def test_commit_and_read_back(manifest, fs):
    assert manifest.get(KEY) is None and manifest.entries() == []
    e = warmed(manifest, ttl=60)
    result = manifest.commit(e)
    assert result.committed and result.entry == e
    assert manifest.get(KEY) == e and manifest.entries() == [e]
    assert names(fs, f"{CACHE}/_manifest/entries/{KEY}") == ["0000000000.json"]
    assert manifest.commit(e).committed   # committing the same entry again writes nothing
    assert len(names(fs, f"{CACHE}/_manifest/entries/{KEY}")) == 1


def test_temp_and_foreign_files_are_never_listed(manifest, fs):
    folder = f"{CACHE}/_manifest/entries/{KEY}"
    fs.write_text(f"{folder}/0000000000.json.1234.tmp", '{"half": ')
    fs.write_text(f"{CACHE}/_manifest/entries/not-a-key/0000000000.json", "{}")
    assert manifest.get(KEY) is None and manifest.entries() == []


def test_an_unreadable_version_is_ignored_and_replaced(manifest, fs):
    fs.write_text(f"{CACHE}/_manifest/entries/{KEY}/0000000000.json", "{broken")
    assert manifest.get(KEY) is None
    e = warmed(manifest)
    assert manifest.commit(e).committed and manifest.get(KEY) == e


def test_union_replaces_and_a_narrower_commit_keeps_the_current_entry(manifest, clock):
    first = warmed(manifest, columns=("a", "b"), priority=Priority.HIGH, ttl=600, hits=4)
    manifest.commit(first)
    narrower = warmed(manifest, columns=("a",), priority=Priority.ALWAYS, ttl=60)
    result = manifest.commit(narrower)
    assert not result.committed and result.entry.data_path == first.data_path
    assert result.entry.priority is Priority.ALWAYS and result.entry.ttl_seconds == 600
    clock.now += 5_000
    union = warmed(manifest, columns=("a", "b", "c"), priority=Priority.LOW, ttl=30)
    result = manifest.commit(union)
    assert result.committed
    now = manifest.get(KEY)
    assert now.columns == ("a", "b", "c") and now.data_path == union.data_path
    assert now.priority is Priority.ALWAYS and now.ttl_seconds == 600 and now.hits == 4
    assert now.retired == ((first.data_path, clock.now / 1000.0),)


def test_commit_evicts_the_entries_of_an_older_version_of_the_file(manifest):
    stale = warmed(manifest, OTHER, size=9)
    manifest.commit(stale)
    manifest.commit(warmed(manifest), supersedes=[stale])
    assert manifest.get(OTHER).state is EntryState.EVICTED
    assert [e.key for e in manifest.entries()] == [KEY]


def test_raise_terms_never_lowers(manifest):
    assert manifest.raise_terms(KEY, Priority.HIGH, 60) is None
    manifest.commit(warmed(manifest, priority=Priority.HIGH, ttl=600))
    assert manifest.raise_terms(KEY, Priority.LOW, 60).priority is Priority.HIGH
    raised = manifest.raise_terms(KEY, Priority.ALWAYS, None)
    assert raised.priority is Priority.ALWAYS and raised.ttl_seconds is None


def run_threads(n, target):
    barrier = threading.Barrier(n)
    errors = []

    def run(i):
        try:
            barrier.wait(timeout=30)
            target(i)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []


def test_two_threads_committing_one_key_leave_one_entry(fs, clock):
    results = [None, None]
    meet = threading.Barrier(2)     # both reach the write of version 0 before either writes it
    managers = [CacheManifest(RacingFs(fs, meet, f"{KEY}/0000000000.json"), CACHE,
                              clock=lambda: clock.now / 1000.0) for _ in range(2)]
    entries = [warmed(m) for m in managers]

    def commit(i):
        results[i] = managers[i].commit(entries[i])

    run_threads(2, commit)
    assert sorted(r.committed for r in results) == [False, True]
    winner = next(r.entry for r in results if r.committed)
    assert all(r.entry == winner for r in results)
    assert managers[0].entries() == [winner]
    assert names(fs, f"{CACHE}/_manifest/entries/{KEY}") == ["0000000000.json"]


@pytest.fixture
def tight_switching():
    """Threads switch every microsecond, so racing writers really meet (hundreds of lost
    create_exclusive races in the test below)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_concurrent_updates_and_usage_are_not_lost(manifest, fs, clock, tight_switching):
    manifest.commit(warmed(manifest, last_used=1.0))
    others = [CacheManifest(fs, CACHE) for _ in range(8)]

    def work(i):
        for j in range(10):
            others[i].usage.record({KEY: (1, 100.0 + i * 10 + j)}, misses=2,
                                   now=100.0 + i * 10 + j)
            if j % 3 == 0:
                others[i].usage.compact()
            if i == 0 and j == 5:
                others[i].raise_terms(KEY, Priority.HIGH, None)

    run_threads(8, work)
    current = manifest.get(KEY)
    assert current.hits == 80 and current.last_used == 179.0
    assert current.priority is Priority.HIGH
    assert manifest.usage.totals().misses == 160
    manifest.usage.compact()
    folded = manifest.get(KEY)
    assert (folded.hits, folded.last_used) == (80, 179.0)
    assert names(fs, f"{CACHE}/_manifest/usage") == []
    assert manifest.usage.totals().misses == 160
    manifest.usage.compact()
    assert manifest.get(KEY) == folded


def test_usage_folding_counts_each_record_once(manifest, fs):
    manifest.commit(warmed(manifest))
    manifest.usage.record({KEY: (2, 5.0), OTHER: (1, 5.0)}, bytes_served=10, now=5.0)
    manifest.usage.record({KEY: (1, 7.0)}, bytes_served=5, now=7.0)
    assert (manifest.get(KEY).hits, manifest.get(KEY).last_used) == (3, 7.0)
    # a compaction that died after committing, before deleting its records
    real_delete = fs.delete
    fs.delete = lambda path, recursive=True: False
    manifest.usage.compact()
    assert manifest.get(KEY).hits == 3 and manifest.usage.totals().bytes_served == 15
    fs.delete = real_delete
    manifest.usage.record({KEY: (1, 9.0)}, bytes_served=1, now=9.0)
    assert manifest.get(KEY).hits == 4
    manifest.usage.compact()
    assert manifest.get(KEY).hits == 4 and manifest.get(KEY).last_used == 9.0
    assert manifest.usage.totals().bytes_served == 16
    assert names(fs, f"{CACHE}/_manifest/usage") == []


def test_evict_marks_at_once_and_only_the_data_it_was_given(manifest):
    old = warmed(manifest, columns=("a",))
    manifest.commit(old)
    manifest.commit(warmed(manifest, columns=("a", "b")))
    assert manifest.evict([old], now=50.0) == []    # replaced meanwhile: not evicted
    current = manifest.get(KEY)
    [gone] = manifest.evict([current], now=50.0)
    assert gone.state is EntryState.EVICTED and gone.evicted_at == 50.0
    assert manifest.entries() == [] and manifest.entries(include_evicted=True) == [gone]
    assert manifest.evict([current], now=60.0) == []


def test_collect_waits_for_the_grace_period(manifest, fs, clock):
    first = warmed(manifest, columns=("a",))
    manifest.commit(first)
    second = warmed(manifest, columns=("a", "b"))
    manifest.commit(second)          # retires first's data at t0
    t0 = clock.now / 1000.0
    manifest.usage.record({KEY: (1, t0)}, now=t0)
    # the replaced version only: usage is folded into the totals, not into a version
    assert manifest.collect(now=t0 + 10) == [f"{CACHE}/_manifest/entries/{KEY}/0000000000.json"]
    assert fs.exists(first.data_path) and manifest.get(KEY).hits == 1
    deleted = manifest.collect(now=t0 + 3600)
    assert first.data_path in deleted and not fs.exists(first.data_path)
    assert manifest.get(KEY).retired == () and fs.exists(second.data_path)

    current = manifest.get(KEY)
    manifest.evict([current], now=t0 + 4000)
    early = [p for p in manifest.collect(now=t0 + 4000 + 3599)   # evicted: old versions go
             if "/_manifest/changes/" not in p]
    assert early and all(p.startswith((f"{CACHE}/_manifest/entries/{KEY}/",
                                       f"{CACHE}/_manifest/totals/")) for p in early)
    assert fs.exists(second.data_path) and manifest.get(KEY).state is EntryState.EVICTED
    deleted = manifest.collect(now=t0 + 4000 + 3600)
    assert second.data_path in deleted and not fs.exists(second.data_path)
    assert manifest.get(KEY) is None and manifest.keys() == []
    assert names(fs, f"{CACHE}/_manifest/usage") == []
    manifest.commit(warmed(manifest))   # the key's usage went with it
    assert manifest.get(KEY).hits == 0


def test_collect_removes_orphan_data_and_old_temp_files(manifest, fs, clock):
    kept = warmed(manifest)
    kept = replace(kept, files=((f"{kept.data_path}/part-0.parquet", 1),))
    manifest.commit(kept)
    orphan = manifest.new_data_path()               # a warm-up that never committed
    fs.write_text(f"{orphan}/part-0.parquet", "x")
    unnamed = f"{kept.data_path}/part-1.parquet"    # in a pack, rows of files never committed
    fs.write_text(unnamed, "x")
    temp = f"{CACHE}/_manifest/entries/{KEY}/0000000001.json.abc.tmp"
    fs.write_text(temp, "{")
    t0 = clock.now / 1000.0
    manifest.usage.record({OTHER: (1, t0)}, now=t0)   # usage of a key that has no entry
    assert manifest.collect(now=t0 + 100) == []
    assert names(fs, f"{CACHE}/_manifest/usage") == []   # folded (into the totals) at once
    deleted = [p for p in manifest.collect(now=t0 + 3600) if "/_manifest/changes/" not in p]
    assert sorted(deleted) == sorted([orphan, temp, unnamed])
    assert fs.exists(f"{kept.data_path}/part-0.parquet") and manifest.get(KEY) == kept


class _CollectedWhileRead:
    """A file system on which another process collects a key right after this one listed it:
    the first read of one of the key's versions finds the whole key folder gone."""

    def __init__(self, fs, key):
        self._fs, self._folder, self.raced = fs, f"{CACHE}/_manifest/entries/{key}", False

    def __getattr__(self, name):
        return getattr(self._fs, name)

    def read_text(self, path):
        return self.read_each([path])[0] or self._fs.read_text(path)

    def read_each(self, paths):
        if any(p.startswith(self._folder + "/") for p in paths) and not self.raced:
            self.raced = True
            self._fs.delete(self._folder, recursive=True)
        return self._fs.read_each(paths)


def test_collect_and_entries_survive_a_key_collected_meanwhile(fs, clock):
    writer = CacheManifest(fs, CACHE, clock=lambda: clock.now / 1000.0)
    gone, kept = warmed(writer), warmed(writer, key=OTHER)
    writer.commit_all([(gone, ()), (kept, ())])
    for read in (lambda m: m.entries(), lambda m: m.collect(now=clock.now / 1000.0)):
        racing = _CollectedWhileRead(fs, KEY)
        reader = CacheManifest(racing, CACHE, clock=lambda: clock.now / 1000.0)
        read(reader)
        assert racing.raced
        assert [e.key for e in reader.entries()] == [OTHER]
        writer.commit(gone)   # back for the next reader


def test_recommit_after_eviction_retires_the_evicted_data(manifest, clock):
    first = warmed(manifest)
    manifest.commit(first)
    manifest.evict([first], now=10.0)
    again = warmed(manifest, columns=("z",))
    assert manifest.commit(again).committed
    assert manifest.get(KEY).retired == ((first.data_path, 10.0),)
    assert first.data_path in manifest.collect(now=10.0 + 3600)


def test_never_markers(manifest, fs):
    never = NeverMarkers(manifest)
    manifest.commit(warmed(manifest))        # source root /lake/t
    never.check("/lake/t/f1.parquet")
    marker = never.set("/lake/t/", reason="holds personal data")
    assert marker.root == "/lake/t" and never.list() == [marker]
    assert manifest.entries() == []          # its entries are evicted at once
    with pytest.raises(CacheNeverError) as err:
        never.check("/lake/t/f1.parquet")
    assert "/lake/t" in str(err.value) and marker.path in str(err.value)
    assert "holds personal data" in str(err.value)
    never.check("/lake/t2/f1.parquet")       # a sibling with a common prefix
    assert never.set("/lake/t") == marker     # idempotent
    fs.write_text(f"{manifest.never_path}/broken.json", "{")
    assert never.list() == [marker]           # an unreadable marker is skipped
    assert never.lift("/lake/t") and not never.lift("/lake/t")
    never.check("/lake/t/f1.parquet")
    assert never.list() == []


def test_a_warmup_and_a_demoter_pass_compose(manifest, clock):
    """The order the Spark side follows: plan, check ALWAYS room, write, commit; then evict."""
    k = CacheKey.create("/lake/t/f1.parquet", 10, 1000, "parquet")
    for columns, priority in [(["a"], Priority.LOW), (["b"], Priority.ALWAYS), (["a"], "high")]:
        plan = plan_warmup(k, columns, priority, 60, manifest.entries())
        if not plan.write:
            manifest.raise_terms(k.hex, plan.priority, plan.ttl_seconds)
            continue
        if plan.priority is Priority.ALWAYS:
            check_always_fits(manifest.entries(), 100, 1000, replacing=plan.supersedes)
        new = replace(warmed(manifest, k.hex, plan.columns, plan.priority, 100),
                      ttl_seconds=plan.ttl_seconds, file_mtime=k.modification_time)
        assert manifest.commit(new, plan.supersedes).committed
    [current] = manifest.entries()
    assert current.columns == ("a", "b") and current.priority is Priority.ALWAYS
    assert choose_evictions(manifest.entries(), 1e12, max_bytes=100) == []   # ALWAYS stays
    manifest.commit(warmed(manifest, OTHER, nbytes=50, ttl=60, last_used=0.0))
    evictions = choose_evictions(manifest.entries(), 60.0, max_bytes=1000)
    assert [v.entry.key for v in evictions] == [OTHER]
    assert [e.key for e in manifest.evict([v.entry for v in evictions], 60.0)] == [OTHER]
    assert [e.key for e in manifest.entries()] == [k.hex]


def test_change_records_name_the_keys_readers_must_read_again(manifest, fs, clock):
    assert manifest.change_names() == set()
    first = warmed(manifest)
    manifest.commit(first)
    names = manifest.change_names()
    assert manifest.changed_keys(names) == {KEY}
    before = manifest.read()
    fresh = warmed(manifest, key=OTHER)
    manifest.commit_all([(fresh, ())], new_keys=frozenset({OTHER}))   # a batch file
    manifest.evict([first], now=5.0)                                  # a usage record
    later = manifest.change_names() - names
    assert len(later) == 2 and manifest.changed_keys(later) == set()  # no folder to read again
    again = manifest.read(before, set())
    assert again.current(KEY).state is EntryState.EVICTED and again.current(OTHER) == fresh
    manifest.usage.record({KEY: (1, 6.0)}, now=6.0)     # usage changes nothing a reader serves
    assert manifest.change_names() - names == later
    manifest.collect(now=5.0 + 3600)                     # the evicted entry goes: a change
    assert manifest.changed_keys(manifest.change_names() - names - later) == {KEY}
    assert manifest.read(again, {KEY}).keys() == [OTHER]
    assert manifest.changed_keys({"0000000000001-" + "0" * 32 + ".json"}) is None


def test_a_warmups_new_entries_go_to_one_batch_file_with_the_folders_before_them(
        manifest, fs, clock):
    """A warm-up of new files writes one manifest file however many files it caches; entries
    in folders of their own (the layout before batch files) are read with them; evicting and
    collecting a batch's entries works as for those, and the batch file goes with its last
    entry (never before: its puts would be served again)."""
    old = warmed(manifest, key="c" * 64)
    manifest.commit(old)                                  # a folder of versions
    third = "d" * 64
    new = [warmed(manifest, key=k) for k in (KEY, OTHER, third)]
    results = manifest.commit_all([(e, ()) for e in new], new_keys=frozenset({KEY, OTHER, third}))
    assert all(r.committed for r in results)
    [batch] = names(fs, f"{CACHE}/_manifest/batches")
    assert names(fs, f"{CACHE}/_manifest/entries") == ["c" * 64]
    assert sorted(manifest.entries(), key=lambda e: e.key) == sorted([old, *new],
                                                                     key=lambda e: e.key)
    wider = warmed(manifest, key=KEY, columns=("a", "b"))   # a widening writes KEY's folder
    assert manifest.commit(wider).committed and manifest.get(KEY).data_path == wider.data_path
    t0 = clock.now / 1000.0
    evicted = manifest.evict([manifest.get(OTHER), manifest.get(KEY)], now=t0)
    assert {e.key for e in evicted} == {KEY, OTHER}
    assert manifest.get(OTHER).state is EntryState.EVICTED
    assert sorted(e.key for e in manifest.entries()) == ["c" * 64, third]
    manifest.collect(now=t0 + 10)
    assert fs.exists(new[1].data_path) and manifest.get(OTHER).state is EntryState.EVICTED
    manifest.collect(now=t0 + 3600)   # OTHER's put is over: not listed, though its file stays
    assert manifest.get(OTHER) is None and fs.exists(f"{CACHE}/_manifest/batches/{batch}")
    assert not fs.exists(wider.data_path) and fs.exists(new[2].data_path)
    assert OTHER not in {e.key for e in manifest.entries(include_evicted=True)}
    manifest.evict([manifest.get(third)], now=t0 + 4000)
    deleted = manifest.collect(now=t0 + 4000 + 3600)
    assert f"{CACHE}/_manifest/batches/{batch}" in deleted and not fs.exists(new[2].data_path)
    manifest.collect(now=t0 + 4000 + 3600)   # KEY's folder went after the batch file
    assert manifest.keys() == ["c" * 64] and manifest.entries() == [old]
    usage = manifest.usage.read()
    assert usage.evictions == {} and usage.collected == {}   # forgotten with their keys


def test_two_warmups_putting_one_new_key_in_batches_agree_on_its_entry(manifest):
    """Batch files are not exclusive per key: the wider put wins, whatever the order, with the
    highest priority; evicting it leaves the other's put, whose data stays until then."""
    narrow = warmed(manifest, columns=("a",), priority=Priority.ALWAYS)
    wide = warmed(manifest, columns=("a", "b"), priority=Priority.LOW)
    manifest.batches.write([wide], 1.0)
    manifest.batches.write([narrow], 2.0)
    current = manifest.get(KEY)
    assert current.data_path == wide.data_path and current.priority is Priority.ALWAYS
    manifest.evict([current], now=5.0)
    assert manifest.get(KEY).data_path == narrow.data_path and manifest.get(KEY).active
    assert manifest.fs.exists(narrow.data_path)


def test_a_commit_that_assumed_a_new_key_still_merges_with_an_existing_entry(manifest):
    """A warm-up that saw no entry of a key writes its first version without reading; when a
    concurrent warm-up committed one meanwhile, the merge rule still decides."""
    first = warmed(manifest, columns=("a", "b"))
    manifest.commit(first)
    narrower = warmed(manifest, columns=("a",))
    [result] = manifest.commit_all([(narrower, ())], new_keys=frozenset({KEY}))
    assert not result.committed and manifest.get(KEY).data_path == first.data_path
    wider = warmed(manifest, columns=("a", "b", "c"))
    [result] = manifest.commit_all([(wider, ())], new_keys=frozenset({KEY}))
    assert result.committed and manifest.get(KEY).retired[0][0] == first.data_path
    fresh = warmed(manifest, key=OTHER)
    [result] = manifest.commit_all([(fresh, ())], new_keys=frozenset({OTHER}))
    assert result.committed and manifest.get(OTHER) == fresh
