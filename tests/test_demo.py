"""``accelerator demo``: the quick run of the lake demo end to end as the installed command runs
it (a subprocess), and how it tells the files of the source from those of indexes and the
cache."""
from __future__ import annotations

import re

from accelerator.commands.demo import TEMPLATES, files_read
from tests.test_cli import run_cli

ROW = re.compile(r"^(\w+) +\d+ ms +\d+ ms +[\d.]+x +(same|DIFF) +(.*)$", re.M)
CACHE = re.compile(r"^cache: [\d.]+ MB used in (\d+) entries, (\d+) hits, \d+ misses, "
                   r"[\d.]+ MB served$", re.M)


def test_files_read_tells_the_source_from_indexes_and_the_cache():
    files = ["file:///w/lake/events/event_date=2026-03-01/part-0.parquet",
             "file:/w/indexes/auto_covering_events_1_user_id/v__=0/part-1.parquet",
             "file:///w/indexes/_cache/data/x.parquet",
             "/w/indexes/_cache/data/y.parquet"]
    assert files_read(files, "/w/indexes") == {"source": 1, "index": 1, "cache": 2}
    assert files_read(files, "file:/w/indexes/") == {"source": 1, "index": 1, "cache": 2}
    assert files_read([], "/w/indexes") == {}


def test_quick_demo_advises_and_keeps_every_result(tmp_path):
    demo = run_cli("demo", "--quick", "--work-dir", str(tmp_path / "demo"))
    assert demo.returncode == 0, demo.stderr[-3000:]
    out = demo.stdout
    assert "replay before advising: round 1 of 3 (warm-up)" in out   # progress lines
    assert "advise job:" in out and "replay after advising: round 3 of 3" in out

    rows = {name: (same, files) for name, same, files in ROW.findall(out)}
    assert sorted(rows) == sorted(t.name for t in TEMPLATES)
    assert all(same == "same" for same, _ in rows.values()), rows
    served = [files for _, files in rows.values() if re.search(r"\b(index|cache) [1-9]", files)]
    assert served, rows   # after advising, some query read an index or the cache

    applied = re.findall(r"^    applied: (create \w+ index (\S+)|cache (\S+)) ", out, re.M)
    assert applied, out
    answered = re.findall(r"^    answered by (.+?): (.+)$", out, re.M)
    assert answered and all(len(reason) > 20 for _, reason in answered), out
    built = {index or f"the cache of {source}" for _, index, source in applied}
    assert {name for name, _ in answered} <= built

    cache = CACHE.search(out)
    assert cache is not None, out
    assert int(cache[1]) > 0 and int(cache[2]) > 0   # the engine cached the landing zone
