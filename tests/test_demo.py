"""``accelerator demo``: the quick run of the lake demo end to end as the installed command runs
it (a subprocess): a template nothing serves is reported as "no change" and credited to no
index; what the report credits and how it tells the files of the source from those of indexes
and the cache (pure Python); the before/after figure."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from accelerator.commands.demo import FIGURE, TEMPLATES
from accelerator.commands.demo_report import (NO_CHANGE, Pairs, effect, figure, row,
                                              same_plan, speed_up, where_read)
from tests.test_cli import run_cli

ROW = re.compile(r"^(\w+) +\d+ ms +\d+ ms +(no change|[\d.]+x) +(same|DIFF) +(.*)$", re.M)
CACHE = re.compile(r"^cache: [\d.]+ MB used in (\d+) entries, (\d+) hits, \d+ misses, "
                   r"[\d.]+ MB served$", re.M)
SYSTEM = "/w/indexes"
SOURCE = [f"file:///w/lake/events/event_date=2026-03-0{d}/part-{i}.parquet"
          for d in (1, 2) for i in (0, 1)]


def _pairs(vanilla: float, accelerated: float) -> Pairs:
    pairs = Pairs()
    for _ in range(3):
        pairs.add(vanilla, accelerated, True)
    return pairs


def test_where_read_tells_the_source_from_indexes_and_the_cache():
    files = ["file:///w/lake/events/event_date=2026-03-01/part-0.parquet",
             "file:/w/indexes/auto_covering_events_1_user_id/v__=0/part-1.parquet",
             "file:///w/indexes/_cache/data/x.parquet",
             "/w/indexes/_cache/data/y.parquet"]
    where = [("source", None), ("index", "auto_covering_events_1_user_id"), ("cache", None),
             ("cache", None)]
    assert [where_read(f, SYSTEM) for f in files] == where
    assert [where_read(f, "file:/w/indexes/") for f in files] == where


def test_a_query_whose_plan_did_not_change_is_no_change_whatever_whynot_says():
    # the plans are vanilla Spark's: a faster accelerated run is noise, and no index is credited
    what = effect(SOURCE, SOURCE, True, ["auto_minmax_events_ts"], SYSTEM)
    assert not what.served and what.credited == ()
    pairs = _pairs(2.184, 1.156)
    assert speed_up(pairs, what) == NO_CHANGE
    line = row("user_lookup", pairs, what)
    assert NO_CHANGE in line and not re.search(r"[\d.]+x", line), line
    assert "same plan" in line and "auto_minmax" not in line


def test_an_index_that_reads_the_same_files_is_not_credited():
    # pages_of_a_day: the partition filter keeps 2 files, a min/max index over them swaps the
    # file list for the same 2 files: the plan differs, but nothing was read less
    day = SOURCE[:2]
    what = effect(day, day, False, ["auto_minmax_events_ts"], SYSTEM)
    assert not what.served and what.credited == ()
    assert speed_up(_pairs(0.233, 0.167), what) == NO_CHANGE
    assert "plan differs, no file read less" in what.describe()


def test_credit_follows_the_files_read():
    covering = [f"file:{SYSTEM}/auto_covering_events_user_id/v__=0/part-00001_00001.parquet"]
    what = effect(SOURCE, covering, False, ["auto_covering_events_user_id"], SYSTEM)
    assert what.credited == ("auto_covering_events_user_id",)
    assert what.describe() == ("read 1 file of index auto_covering_events_user_id where vanilla "
                               "Spark reads 4 files")
    assert speed_up(_pairs(0.8, 0.2), what) == "4.0x"

    pruned = effect(SOURCE, SOURCE[:1], False, ["auto_minmax_events_ts"], SYSTEM)
    assert pruned.credited == ("auto_minmax_events_ts",)
    assert pruned.describe().endswith("(auto_minmax_events_ts skipped 3)")

    # the cache serves every file: it alone is credited, not the min/max index whyNot names
    cached = [f"{SYSTEM}/_cache/data/{i}.parquet" for i in range(4)]
    served = effect(SOURCE, cached, False, ["auto_minmax_events_ts", "cache"], SYSTEM)
    assert served.credited == ("cache",)
    assert served.describe() == "read 4 cached copies where vanilla Spark reads 4 files"


def test_same_plan_ignores_expression_ids_only():
    a = "Filter (isnotnull(id#12L) AND (id#12L = 5))\n+- FileScan parquet [id#12L] plan_id=3"
    b = "Filter (isnotnull(id#40L) AND (id#40L = 5))\n+- FileScan parquet [id#40L] plan_id=9"
    assert same_plan(a, b)
    assert not same_plan(a, b.replace("FileScan parquet", "FileScan parquet PrunedFileIndex"))


def test_figure_is_an_svg_with_a_pair_of_bars_per_template():
    served = effect(SOURCE, SOURCE[:1], False, ["m"], SYSTEM)
    unserved = effect(SOURCE, SOURCE, True, [], SYSTEM)
    svg = figure([("day_window", _pairs(0.4, 0.1), served),
                  ("user_lookup", _pairs(0.3, 0.2), unserved)], "demo <1>")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "4.0x" in texts and NO_CHANGE in texts and "demo <1>" in texts
    assert "400 ms" in texts and "100 ms" in texts
    assert len(root.findall(f"{ns}rect")) == 1 + 2 + 2 * 2   # background, legend, bars


def test_quick_demo_credits_only_what_the_plans_show_and_keeps_every_result(tmp_path):
    work = tmp_path / "demo"
    demo = run_cli("demo", "--quick", "--work-dir", str(work))
    assert demo.returncode == 0, demo.stderr[-3000:]
    out = demo.stdout
    assert "workload (recorded in the query history): round 1 of 3" in out   # progress lines
    assert "advise job:" in out and "alternating pairs: pair 3 of 3" in out

    rows = {m[0]: m[1:] for m in ROW.findall(out)}
    assert sorted(rows) == sorted(t.name for t in TEMPLATES)
    assert all(same == "same" for _, same, _ in rows.values()), rows
    assert any(ratio != NO_CHANGE for ratio, _, _ in rows.values()), rows   # something served
    # one day of events: the partition filter alone picks its files, which no index reads less
    assert rows["pages_of_a_day"][0] == NO_CHANGE, rows["pages_of_a_day"]

    # the engine's reason is given under a template only for what its files show served it
    blocks = dict(re.findall(r"^(\w+) .*\n((?:    .*\n)*)", out, re.M))
    for name, (ratio, _, did) in rows.items():
        answered = re.findall(r"^    answered by (.+?): (.+)$", blocks[name], re.M)
        if ratio == NO_CHANGE:
            assert not answered, (name, blocks[name])
        for who, reason in answered:
            assert len(reason) > 20
            assert (who in did) or (who.startswith("the cache of") and "cached" in did), \
                (name, who, did)

    applied = re.findall(r"^    applied: (create \w+ index (\S+)|cache (\S+)) ", out, re.M)
    assert applied, out
    cache = CACHE.search(out)
    assert cache is not None, out
    assert int(cache[1]) > 0 and int(cache[2]) > 0   # the engine cached the landing zone

    assert f"before/after figure: {work / FIGURE}" in out
    svg = ET.parse(work / FIGURE).getroot()
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert all(t.name in texts for t in TEMPLATES)
