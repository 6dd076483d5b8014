"""Soundness of text-index pruning, without a JVM: random values (unicode, astral characters,
punctuation, the anchor characters themselves, empty, very long, null) in real tantivy shards,
random LIKE and regular-expression patterns; a file the index rules out must hold no row that a
reference matcher (Spark's LIKE semantics; Python's ``re`` on the subset of patterns that Java
reads the same way) accepts."""
from __future__ import annotations

import random
import re

import pytest

from indexes.text import literals as L
from indexes.text.shards import Shard, ShardWriter, matching_positions

ALPHABET = (list("abcxyzABCXYZ0123456789") + list(" -_%\\.*+?()[]{}|^$=:/") +
            ["é", "É", "ß", "ẞ", "İ", "ı", "I", "i", "Σ", "σ", "ς", "ſ", "K", "\u0307", "😀", "𝔸",
             "\u0002", "\u0003", "\n", "ǅ", "ﬁ", "中"])


def random_value(rng: random.Random) -> str | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.1:
        return ""
    n = rng.randint(200, 400) if roll > 0.97 else rng.randint(1, 14)
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def like_matches(pattern: str, value: str, escape: str = "\\") -> bool | None:
    """Spark's LIKE (None: Spark rejects the pattern)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            if i + 1 >= len(pattern) or pattern[i + 1] not in ("_", "%", escape):
                return None
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append("." if c == "_" else ".*" if c == "%" else re.escape(c))
        i += 1
    return re.fullmatch("".join(out), value, re.DOTALL) is not None


def _like_escape(text: str) -> str:
    return "".join("\\" + c if c in "_%\\" else c for c in text)


def random_like(rng: random.Random, sample: str) -> str:
    start = rng.randint(0, len(sample))
    piece = sample[start:start + rng.randint(0, 9)]
    if piece and rng.random() < 0.3:   # a wildcard inside
        k = rng.randrange(len(piece))
        return _like_escape(piece[:k]) + rng.choice("_%") + _like_escape(piece[k + 1:]) + "%"
    shape = rng.random()
    body = _like_escape(piece)
    if rng.random() < 0.05:
        body += "\\"          # invalid: ends with the escape character
    if shape < 0.4:
        return f"%{body}%"
    if shape < 0.6:
        return f"{body}%"
    if shape < 0.8:
        return f"%{body}"
    return body


def random_regex(rng: random.Random, sample: str) -> str:
    def lit() -> str:
        start = rng.randint(0, len(sample))
        return re.escape(sample[start:start + rng.randint(0, 8)])
    shape = rng.randrange(8)
    if shape == 0:
        return "^" + lit()
    if shape == 1:
        return f"{lit()}.*{lit()}"
    if shape == 2:
        return f"({lit()}|{lit()})"
    if shape == 3:
        return f"{lit()}[xy]{lit()}"
    if shape == 4:
        return f"(?i){lit()}"
    if shape == 5:
        return f"({lit()})+{lit()}?"
    if shape == 6:
        return f"(?:{lit()}){{2}}\\d*"
    return lit()


@pytest.fixture(scope="module", params=["rows", "groups"])
def corpus(request, tmp_path_factory):
    """40 files of 1-12 rows in 4 shards (files split across shards too), all looked up; the
    shards hold one document per row, or per group of rows."""
    rng = random.Random(20261122)
    files = {f"file:/data/f{i:02d}.parquet": [random_value(rng) for _ in range(rng.randint(1, 12))]
             for i in range(40)}
    grouped = request.param == "groups"
    shards = []
    for s in range(4):
        directory = str(tmp_path_factory.mktemp(f"shard{s}"))
        writer = ShardWriter(directory, heap_bytes=15_000_000, grouped=grouped)
        for path, values in files.items():
            for row, v in enumerate(values):
                if hash((path, row)) % 4 == s:
                    writer.add(path, row, v)
        writer.close()
        shard = Shard.open(directory, list(writer.files), grouped)
        shard.frequent_share = 1.0
        shards.append(shard)
    return files, shards


def _kept(shards, req) -> set[str]:
    kept: set[str] = set()
    for shard in shards:
        kept |= shard.may_match(req)[0]
    return kept


def test_random_like_and_regex_patterns_never_skip_a_matching_file(corpus):
    files, shards = corpus
    rng = random.Random(7)
    values = [v for vs in files.values() for v in vs if v]
    cases = pruned = 0
    for _ in range(1300):
        sample = rng.choice(values)
        lowered = rng.random() < 0.3
        pattern = random_like(rng, sample.lower() if lowered else sample)
        req = L.like(pattern)
        if like_matches(pattern, "") is None:
            assert req is None, pattern
            continue
        assert req is not None, pattern
        kept = _kept(shards, req)
        for path, vs in files.items():
            hit = any(v is not None and like_matches(pattern, v.lower() if lowered else v) for v in vs)
            assert not hit or path in kept, (pattern, lowered, path, vs)
            pruned += path not in kept
        cases += 1
    for _ in range(900):
        sample = rng.choice(values)
        pattern = random_regex(rng, sample)
        req = L.regex(pattern)
        assert req is not None, pattern
        kept = _kept(shards, req)
        for path, vs in files.items():
            hit = any(v is not None and re.search(pattern, v) for v in vs)
            assert not hit or path in kept, (pattern, path, vs)
            pruned += path not in kept
        cases += 1
    assert cases >= 2000
    assert pruned > cases * 10, "the index should rule out many files"


def test_equality_in_and_prefix_suffix(corpus):
    files, shards = corpus
    for path, vs in list(files.items())[:10]:
        for v in vs:
            if v is None:
                continue
            for req, accept in ((L.equals(v), lambda x: x == v),
                                (L.starts_with(v[:4]), lambda x: x.startswith(v[:4])),
                                (L.ends_with(v[-4:]), lambda x: x.endswith(v[-4:])),
                                (L.contains(v[1:6]), lambda x: v[1:6] in x)):
                kept = _kept(shards, req)
                assert path in kept
                for other, ovs in files.items():
                    if any(o is not None and accept(o) for o in ovs):
                        assert other in kept


def test_like_reduction():
    assert L.like("%ERR-4711%") == L.Has("ERR-4711")
    assert L.like("abc%") == L.Has(L.START + "abc")
    assert L.like("%abc") == L.Has("abc" + L.END)
    assert L.like("abc") == L.Has(L.START + "abc" + L.END)
    assert L.like("abcd_efgh%") == L.AllOf((L.Has(L.START + "abcd"), L.Has("efgh")))
    assert L.like("a\\%bc%") == L.Has(L.START + "a%bc")
    assert L.like("#%xyz%", "#") == L.Has(L.START + "%xyz")
    assert L.like("%ab%") == L.ANYTHING       # too short to look up
    assert L.like("abc\\") is None              # Spark rejects it
    assert L.like("a\\bc") is None


@pytest.mark.parametrize("pattern, expected", [
    ("ERR-4711", L.Has("ERR-4711")),
    ("^abc", L.Has(L.START + "abc")),
    ("(?m)^abc", L.Has("abc")),
    ("timeout.*db-7", L.AllOf((L.Has("timeout"), L.Has("db-7")))),
    ("a(bcd|efg)h", L.AnyOf((L.Has("bcd"), L.Has("efg")))),
    ("(abc)?xy", L.ANYTHING),
    ("(abc)+", L.Has("abc")),
    ("(?=abcd)", L.Has("abcd")),
    ("(?!abcd)", L.ANYTHING),
    ("(?i)Timeout", L.Has("Timeout")),
    ("ab[cd]ef", L.ANYTHING),
])
def test_regex_reduction(pattern, expected):
    assert L.regex(pattern) == expected


@pytest.mark.parametrize("pattern", [
    "\\Qa.b\\E", "\\p{L}abcd", "[a[b]c]defg", "[a-z&&[def]]xyz", "a{", "a{,3}bcd", "(?x)a b c",
    "(?<name>abc)", "\\0abc", "\\1abc", "\\vabc", "\\habc", "[]abc]", "abc\\",
])
def test_regex_constructs_java_reads_differently_prune_nothing(pattern):
    assert L.regex(pattern) is None


def test_fold_is_a_homomorphism_insensitive_to_case_mappings():
    for c in map(chr, range(0x30000)):
        if 0xD800 <= ord(c) <= 0xDFFF:
            continue
        assert L.fold(c.lower()) == L.fold(c) == L.fold(c.upper()), hex(ord(c))
    assert L.fold("İSTANBUL") == L.fold("istanbul") == L.fold("ıstanbul")


def test_exact_matching_of_full_text_queries():
    values = ["Timeout talking to db-7", "timeout", None, "db 7 timeout later", "other"]
    assert matching_positions("timeout AND db", values) == [0, 3]
    assert matching_positions('"db 7"', values) == [0, 3]
    assert matching_positions("timeout -db", values) == [1]     # tantivy: exclusion is -term
    assert matching_positions("time*", values) == [0, 1, 3]


def test_frequent_literal_keeps_files_without_lookup(tmp_path):
    writer = ShardWriter(str(tmp_path / "s"), heap_bytes=15_000_000)
    for i in range(12_000):
        writer.add(f"file:/f{i % 3}", i, f"INFO {i} ok" if i != 5 else "ERROR ERR-4711")
    writer.close()
    shard = Shard.open(str(tmp_path / "s"), list(writer.files))
    assert shard.may_match(L.contains("INFO")) == ({"file:/f0", "file:/f1", "file:/f2"}, False)
    assert shard.may_match(L.contains("ERR-4711")) == ({"file:/f2"}, True)
    assert shard.may_match(L.contains("nowhere")) == (set(), True)
