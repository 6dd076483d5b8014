"""Text-index shards of groups of rows, without a JVM: the relaxation of full-text queries to a
requirement over literals (pure), its soundness against tantivy's exact matching on random rows
and queries (a file ruled out holds no matching row), and groups cut at row groups and at long
values."""
from __future__ import annotations

import random

import pytest

from indexes.text import literals as L
from indexes.text.relax import relax
from indexes.text.shards import GROUP_ROWS, Shard, ShardWriter, check_query, matching_positions


def words(text: str) -> list[str]:
    """A stand-in for tantivy's default tokenizer in the pure tests."""
    return [w.lower() for w in "".join(c if c.isalnum() else " " for c in text).split()]


def has(*words: str) -> L.Requirement:
    return L.all_of([L.contains(w) for w in words])


@pytest.mark.parametrize("query, expected", [
    ("timeout", has("timeout")),
    ('"db-42" AND timeout', has("timeout")),      # "db", "42": too short to look up
    ('"user-1234" AND timeout', has("user", "1234", "timeout")),
    ("timeout user", L.any_of([has("timeout"), has("user")])),
    ("timeout OR user", L.any_of([has("timeout"), has("user")])),
    ("timeout -user", has("timeout")),
    ("timeout AND NOT user", has("timeout")),
    ("+timeout -(user OR two)", has("timeout")),
    ("tim* AND code*", has("tim", "code")),
    ("TIM*", has("tim")),
    ("(abc OR bcd) AND cde", L.all_of([L.any_of([has("abc"), has("bcd")]), has("cde")])),
    ("abc AND bcd OR cde", L.any_of([has("abc"), has("bcd"), has("cde")])),
    ("abc AND db_777*", has("abc")),     # a prefix over two words: requires nothing
    ("écoles AND abc", has("abc")),      # non-ASCII: requires nothing
    ("écoles OR abc", L.ANYTHING),
])
def test_relaxation(query, expected):
    assert relax(query, words) == expected


@pytest.mark.parametrize("query", [
    "", "-user", "w:timeout", "timeout^2", '"a b"~2', "[a TO b]", 'unbalanced "quote', "abc OR",
    "AND abc", "(abc bcd", "abc) bcd", "abc\\-bcd", "---", "abc OR bcd*cde",
])
def test_unknown_syntax_requires_nothing(query):
    assert relax(query, words) == L.ANYTHING


VOCABULARY = ["timeout", "Timeout", "db", "7", "db-7", "error", "ERR-42", "tim", "user_1",
              "héllo", "ÉCOLE", "a", "b", "two", "x" * 45, "alpha", "Bravo", "charlie", "DELTA",
              "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]
SEPARATORS = [" ", " ", "-", ", ", "_", ":", "/"]


def random_row(rng: random.Random) -> str | None:
    if rng.random() < 0.05:
        return None
    out = []
    for _ in range(rng.randint(0, 4)):
        out += [rng.choice(VOCABULARY), rng.choice(SEPARATORS)]
    return "".join(out[:-1])


def random_query(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth < 2 and roll < 0.3:
        parts = [random_query(rng, depth + 1) for _ in range(rng.randint(2, 3))]
        joins = [rng.choice([" AND ", " OR ", " "]) for _ in parts[1:]]
        text = parts[0] + "".join(j + p for j, p in zip(joins, parts[1:]))
        return f"({text})" if depth else text
    word = rng.choice(VOCABULARY)
    if roll < 0.45:
        leaf = f'"{word} {rng.choice(VOCABULARY)}"'
    elif roll < 0.6:
        leaf = word[:rng.randint(1, len(word))] + "*"
    else:
        leaf = word
    return rng.choice(["", "", "", "+", "-"]) + leaf


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """60 files of 1-8 rows in 3 shards of groups of rows."""
    rng = random.Random(20261125)
    files = {f"file:/data/f{i:02d}.parquet": [random_row(rng) for _ in range(rng.randint(1, 8))]
             for i in range(60)}
    shards = []
    for s in range(3):
        directory = str(tmp_path_factory.mktemp(f"groups{s}"))
        writer = ShardWriter(directory, heap_bytes=15_000_000, grouped=True)
        for i, (path, values) in enumerate(files.items()):
            if i % 3 == s:
                for row, v in enumerate(values):
                    writer.add(path, row, v)
        writer.close()
        shards.append(Shard.open(directory, list(writer.files), grouped=True))
    return files, shards


def matching_files(files: dict[str, list], query: str) -> set[str]:
    """The files holding a row that tantivy matches ``query`` with (ValueError: invalid)."""
    owners = [path for path, vs in files.items() for _ in vs]
    return {owners[i] for i in matching_positions(query, [v for vs in files.values() for v in vs])}


def test_random_queries_never_rule_out_a_file_holding_a_match(grouped):
    files, shards = grouped
    rng = random.Random(11)
    cases = ruled_out = 0
    while cases < 400:
        query = random_query(rng)
        try:
            check_query(query)
            exact = matching_files(files, query)
        except ValueError:
            continue
        kept = set().union(*(s.candidate_files(query) for s in shards))
        assert exact <= kept, (query, sorted(exact - kept))
        ruled_out += len(files) - len(kept)
        cases += 1
    assert ruled_out > cases * 5, "the relaxed queries should rule out many files"


def test_search_candidates_of_simple_queries_are_the_files_holding_them(grouped):
    files, shards = grouped
    for query in ['"user_1" OR charlie', "error", "juliet -two", "foxt*", "alpha AND bravo"]:
        exact = matching_files(files, query)
        kept = set().union(*(s.candidate_files(query) for s in shards))
        assert exact and exact <= kept
        assert len(kept) < len(files)


def test_groups_are_cut_at_row_groups_and_their_ranges_cover_the_rows(tmp_path):
    starts = [0, 700, 1300, 1300 + GROUP_ROWS + 50]
    total = starts[-1] + 400
    needle = {5, 699, 700, 1299, 1300 + GROUP_ROWS + 7, total - 1}
    writer = ShardWriter(str(tmp_path / "s"), grouped=True, first_rows={"file:/a": starts})
    for row in range(total):
        writer.add("file:/a", row, "ERR-4711 here" if row in needle else f"INFO {row % 50}")
    writer.add("file:/b", -1, "ERR-4711 in a file without row positions")
    writer.close()
    shard = Shard.open(str(tmp_path / "s"), list(writer.files), grouped=True)
    ranges = shard.matching_ranges(L.contains("ERR-4711"), 100)
    assert ranges["file:/b"] == [(-1, -1)]
    found = sorted(ranges["file:/a"])
    assert all(any(first <= r <= last for first, last in found) for r in needle)
    bounds = starts + [total]
    for first, last in found:   # each within one row group, at most GROUP_ROWS rows
        i = max(k for k, s in enumerate(starts) if s <= first)
        assert last < bounds[i + 1] and last - first < GROUP_ROWS
    assert len(found) == 4     # 5, 699 | 700, 1299 | the second part of the split group | last
    assert shard.matching_ranges(L.contains("INFO"), 3) is None
    assert shard.may_match(L.contains("INFO")) == ({"file:/a"}, True)


def test_groups_of_long_values_are_cut_at_about_group_chars(tmp_path):
    writer = ShardWriter(str(tmp_path / "s"), grouped=True)
    long = "x" * 20_000     # a step of 128 rows holds 2.56 M characters: one group each
    writer.add_run("file:/a", list(range(300)), [long] * 299 + ["ERR-4711 " + long])
    writer.close()
    shard = Shard.open(str(tmp_path / "s"), list(writer.files), grouped=True)
    assert shard.docs == 3
    assert shard.matching_ranges(L.contains("ERR-4711"), 100) == {"file:/a": [(256, 299)]}
