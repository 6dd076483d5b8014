"""Tantivy shards of a text index: their schema, how one is written from a task's rows, and
how one answers "which files may hold a value meeting this requirement" and full-text queries.

A shard holds documents of one of two layouts (its manifest's ``docs``):

- ``groups`` (the default): one document per group of at most :data:`GROUP_ROWS` consecutive
  rows of one file, within one row group when the file's layout is known: ``f`` the file
  (ordinal within the shard), ``r`` and ``e`` its first and last row position in the file
  (Parquet's ``_metadata.row_index``, -1 when unknown) and ``g`` the trigrams of its folded,
  anchored values (doc ids only). Postings per group rather than per row make the index a
  small fraction of the column; a full-text query is relaxed to a requirement over literals
  (:mod:`indexes.text.relax`).
- ``rows`` (``TextIndexConfig(scoring=True)`` and indexes built before groups): one document
  per row, ``f``, ``r`` and ``g`` as above and ``w`` with word positions, so a query matches
  rows exactly and gets tantivy's BM25 score per row (:meth:`Shard.search`).
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from indexes.text import relax
from indexes.text.literals import END, GRAM, START, AllOf, Has, Requirement, fold, grams

GRAMS_TOKENIZER = "accelerator_trigram"
#: A literal held by more than this share of a shard's rows, and by at least FREQUENT_ROWS of
#: them, is "frequent": the shard's files are all kept without looking them up (most files
#: hold it, and collecting its postings would cost milliseconds per shard).
FREQUENT_SHARE = 0.2
FREQUENT_ROWS = 10_000
#: The most rows one document of a grouped shard holds, and about the most characters (a
#: group is cut after the step of _STEP_ROWS rows that reaches it).
GROUP_ROWS = 10_000
GROUP_CHARS = 2_000_000
_STEP_ROWS = 128


def _tantivy() -> Any:
    import tantivy

    return tantivy


def schema(grouped: bool = False) -> Any:
    """The fields of a shard's documents (see the module's docstring)."""
    t = _tantivy()
    b = t.SchemaBuilder()
    b.add_integer_field("f", fast=True, indexed=False)
    b.add_integer_field("r", fast=True, indexed=False)
    if grouped:
        b.add_integer_field("e", fast=True, indexed=False)
    b.add_text_field("g", tokenizer_name=GRAMS_TOKENIZER, index_option="basic")
    if not grouped:
        b.add_text_field("w", tokenizer_name="default", index_option="position")
    return b.build()


def _register(index: Any) -> Any:
    t = _tantivy()
    index.register_tokenizer(GRAMS_TOKENIZER,
                             t.TextAnalyzerBuilder(t.Tokenizer.ngram(GRAM, GRAM, False)).build())
    return index


def indexed_form(value: str) -> str:
    """What the ``g`` field tokenizes: the folded value between the anchors."""
    return START + fold(value) + END


class ShardWriter:
    """Writes one shard into a local directory from rows (file, row position, value).

    ``grouped``: one document per group of rows (see the module's docstring), cut where the
    file changes, the row group changes (``first_rows``: per file, the first row of each of its
    row groups, ascending), the rows stop ascending, or the group reaches :data:`GROUP_ROWS`
    rows or :data:`GROUP_CHARS` characters.
    A group's values are indexed as one text: their anchored folded forms one after the other
    (which only adds grams across two values, never hides one)."""

    def __init__(self, directory: str, heap_bytes: int = 64 * 1024 * 1024, grouped: bool = False,
                 first_rows: dict[str, list[int]] | None = None):
        t = _tantivy()
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.grouped = grouped
        self._index = _register(t.Index(schema(grouped), path=directory))
        self._writer = self._index.writer(heap_bytes, 1)
        self._first_rows = first_rows or {}
        self._group: tuple[int, int, int] | None = None   # (file ordinal, row group, first row)
        self._last = -1
        self._values: list[str | None] = []
        self._chars = 0
        self.files: dict[str, int] = {}
        self.rows = 0
        self.text_bytes = 0

    def add(self, file: str, row: int, value: str | None) -> None:
        """Adds one row."""
        self.add_run(file, [row], [value])

    def add_run(self, file: str, rows: Sequence[int], values: Sequence[str | None]) -> None:
        """Adds rows of one file: their positions (-1 each when unknown) and values."""
        ordinal = self.files.setdefault(file, len(self.files))
        self.rows += len(values)
        if not self.grouped:
            t = _tantivy()
            for row, value in zip(rows, values):
                if value is not None:
                    doc = t.Document()
                    doc.add_integer("f", ordinal)
                    doc.add_integer("r", row)
                    doc.add_text("g", indexed_form(value))
                    doc.add_text("w", value)
                    self._writer.add_document(doc)
                    self.text_bytes += _utf8_bytes(value)
            return
        starts = self._first_rows.get(file)
        at = np.asarray(rows, dtype=np.int64)
        groups = (np.searchsorted(np.asarray(starts, dtype=np.int64), at, side="right")
                  if starts else np.zeros(len(at), dtype=np.int64))
        cuts = np.flatnonzero((groups[1:] != groups[:-1]) | (at[1:] < at[:-1])) + 1
        bounds = [0, *cuts.tolist(), len(at)]
        for begin, end in zip(bounds, bounds[1:]):
            self._add_segment(ordinal, int(groups[begin]), at, values, begin, end)

    def _add_segment(self, ordinal: int, group: int, rows: Any, values: Sequence[str | None],
                     begin: int, end: int) -> None:
        """Adds rows ``begin:end`` (of one row group, ascending) to groups of at most
        GROUP_ROWS rows (and about GROUP_CHARS characters), continuing the open group when they
        follow it."""
        while begin < end:
            first = int(rows[begin])
            if (self._group is None or self._group[:2] != (ordinal, group) or first < self._last
                    or len(self._values) >= GROUP_ROWS or self._chars >= GROUP_CHARS):
                self._flush()
                self._group = (ordinal, group, first)
            take = min(end - begin, GROUP_ROWS - len(self._values), _STEP_ROWS)
            step = values[begin:begin + take]
            self._values.extend(step)
            self._chars += sum(map(len, filter(None, step)))
            self._last = int(rows[begin + take - 1])
            begin += take

    def _flush(self) -> None:
        """Adds the open group's document (if one of its rows holds a value)."""
        present = [v for v in self._values if v is not None]
        if present and self._group is not None:
            ordinal, _, first = self._group
            doc = _tantivy().Document()
            doc.add_integer("f", ordinal)
            doc.add_integer("r", first)
            doc.add_integer("e", self._last)
            doc.add_text("g", fold(START + (END + START).join(present) + END))
            self._writer.add_document(doc)
            self.text_bytes += sum(map(_utf8_bytes, present))
        self._group, self._values, self._chars = None, [], 0

    def close(self) -> list[str]:
        """Commits and returns the names of the shard's files."""
        self._flush()
        self._writer.commit()
        self._writer.wait_merging_threads()
        return sorted(os.listdir(self.directory))


def _utf8_bytes(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def _gram_query(t: Any, sch: Any, req: Requirement) -> Any:
    if isinstance(req, Has):
        terms = [t.Query.term_query(sch, "g", g) for g in sorted(grams(req.text))]
        return t.Query.boolean_query([(t.Occur.Must, q) for q in terms])
    occur = t.Occur.Must if isinstance(req, AllOf) else t.Occur.Should
    if not req.parts:
        return t.Query.all_query() if isinstance(req, AllOf) else t.Query.empty_query()
    return t.Query.boolean_query([(occur, _gram_query(t, sch, p)) for p in req.parts])


@dataclass
class Shard:
    """An opened shard: ``files[i]`` is the source file of ordinal ``i`` (None: ignored);
    ``grouped``: its documents are groups of rows, not rows."""

    index: Any
    files: list[str | None]
    docs: int
    grouped: bool = False
    frequent_share: float = FREQUENT_SHARE

    @staticmethod
    def open(directory: str, files: list[str | None], grouped: bool = False) -> "Shard":
        t = _tantivy()
        index = _register(t.Index.open(directory))
        return Shard(index, files, index.searcher().num_docs, grouped)

    def _estimate(self, searcher: Any, req: Requirement) -> int:
        """An upper bound of the documents meeting ``req``, from document frequencies alone."""
        if isinstance(req, Has):
            return min((searcher.doc_freq("g", g) for g in grams(req.text)), default=self.docs)
        counts = [self._estimate(searcher, p) for p in req.parts]
        if isinstance(req, AllOf):
            return min(counts, default=self.docs)
        return sum(counts)

    def _files_of(self, searcher: Any, query: Any) -> set[str]:
        found = searcher.aggregate(query, {"f": {"terms": {"field": "f", "size": len(self.files)}}})
        ordinals = {int(b["key"]) for b in found["f"]["buckets"]}
        return {self.files[o] for o in ordinals if o < len(self.files) and self.files[o]}

    def may_match(self, req: Requirement) -> tuple[set[str], bool]:
        """The files of this shard with a row meeting ``req`` (a superset), and whether the
        postings were looked up (False: the literal is frequent among the rows of a shard of
        rows, every file is kept)."""
        known = {f for f in self.files if f is not None}
        if not known:
            return set(), False
        searcher = self.index.searcher()
        estimate = self._estimate(searcher, req)
        if estimate == 0:
            return set(), True
        if (not self.grouped and estimate > self.frequent_share * self.docs
                and estimate >= FREQUENT_ROWS):
            return known, False
        return self._files_of(searcher, _gram_query(_tantivy(), self.index.schema, req)), True

    def matching_ranges(self, req: Requirement,
                        limit: int) -> dict[str, list[tuple[int, int]]] | None:
        """Per file of this shard, the ranges of row positions (first, last) holding every row
        that may meet ``req`` (a superset), or None when the postings estimate more than
        ``limit`` documents (rows, or groups of rows) hold it."""
        searcher = self.index.searcher()
        estimate = self._estimate(searcher, req)   # an upper bound of the hits
        if not any(self.files) or estimate == 0:
            return {}
        if estimate > limit:
            return None
        query = _gram_query(_tantivy(), self.index.schema, req)
        addresses = [a for _, a in searcher.search(query, limit=estimate).hits]
        firsts = searcher.fast_field_values("r", addresses)
        lasts = searcher.fast_field_values("e", addresses) if self.grouped else firsts
        out: dict[str, list[tuple[int, int]]] = {}
        for f, first, last in zip(searcher.fast_field_values("f", addresses), firsts, lasts):
            if f is not None and f < len(self.files) and self.files[f]:
                out.setdefault(self.files[f], []).append((first, last))
        return out

    def candidate_files(self, query: str) -> set[str]:
        """The files of this shard that may hold a row matching the full-text ``query``: exactly
        those that do in a shard of rows, a superset in a shard of groups."""
        if not self.grouped:
            return self._files_of(self.index.searcher(), parse(self.index, query))
        return self.may_match(relax.relax(query, _default_analyzer().analyze))[0]

    def search(self, query: str) -> Iterable[tuple[str, int, float]]:
        """(file, row position, score) of every row matching the full-text ``query``; a shard
        of rows only."""
        if self.grouped:
            raise ValueError("a shard of groups of rows has no score per row")
        searcher = self.index.searcher()
        parsed = parse(self.index, query)
        count = searcher.search(parsed, limit=1, count=True).count
        if not count:
            return []
        hits = searcher.search(parsed, limit=count).hits
        addresses = [a for _, a in hits]
        files = searcher.fast_field_values("f", addresses)
        rows = searcher.fast_field_values("r", addresses)
        return [(self.files[f], r, score) for (score, _), f, r in zip(hits, files, rows)
                if f is not None and f < len(self.files) and self.files[f]]


@functools.lru_cache(maxsize=1)
def _default_analyzer() -> Any:
    """Tantivy's ``default`` tokenizer: simple words, at most 40 bytes, lower-cased."""
    t = _tantivy()
    return (t.TextAnalyzerBuilder(t.Tokenizer.simple()).filter(t.Filter.remove_long(40))
            .filter(t.Filter.lowercase()).build())


_PREFIX = re.compile(r'(?<![^\s(+-])([^\s"():*+\-^/~\\]+)\*(?=$|[\s)])')


def parse(index: Any, query: str) -> Any:
    """Parses a full-text query in tantivy's language over the indexed words; a bare ``term*``
    is a prefix (a regular expression over the index's terms, which tantivy's parser only
    offers for the last word of a phrase). Raises ValueError when the query is invalid."""
    parts = query.split('"')
    for i in range(0, len(parts), 2):   # outside quoted phrases
        parts[i] = _PREFIX.sub(lambda m: "w:/" + re.escape(m.group(1).lower()) + ".*/", parts[i])
    return index.parse_query('"'.join(parts), ["w"], allow_regexes=True)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BOOLEAN = "BooleanQuery { subqueries: ["


def _excluding_only(parsed: Any) -> bool:
    """Whether a parsed query holds a boolean clause whose subqueries are all excluded (which
    tantivy matches nothing with), read from its debug form with string literals blanked."""
    text = _STRING.sub('""', repr(parsed))
    start = text.find(_BOOLEAN)
    while start != -1:
        occurs, depth, i = [], 0, start + len(_BOOLEAN)
        while depth >= 0:   # up to the closing bracket of the subqueries
            c = text[i]
            if c in "([{":
                if depth == 0 and c == "(":
                    occurs.append(text[i + 1:text.index(",", i)])
                depth += 1
            elif c in ")]}":
                depth -= 1
            i += 1
        if occurs and all(o == "MustNot" for o in occurs):
            return True
        start = text.find(_BOOLEAN, start + 1)
    return False


def check_query(query: str) -> None:
    """Raises ValueError when ``query`` is not a valid full-text query (with tantivy's message)
    or holds a part that only excludes words, such as ``x AND NOT y``: tantivy reads ``NOT y``
    there as a clause of its own that matches nothing, so the whole query would match nothing."""
    t = _tantivy()
    if _excluding_only(parse(_register(t.Index(schema())), query)):
        raise ValueError(
            "a part of it only excludes words (like 'NOT y' in 'x AND NOT y' or 'x OR NOT y'), "
            "which tantivy reads as a clause of its own that matches nothing; put the words to "
            "exclude next to words to find instead: write 'x -y'")


def matching_positions(query: str, values: list[str | None]) -> list[int]:
    """Positions of ``values`` matching the full-text ``query``, evaluated by tantivy over an
    in-memory index of just these values (the exact check behind ``Hyperspace.search``)."""
    t = _tantivy()
    index = _register(t.Index(schema()))
    writer = index.writer(15_000_000, 1)
    for i, v in enumerate(values):
        if v is not None:
            doc = t.Document()
            doc.add_integer("f", i)
            doc.add_text("w", v)
            writer.add_document(doc)
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    if not searcher.num_docs:
        return []
    hits = searcher.search(parse(index, query), limit=searcher.num_docs).hits
    return sorted(searcher.fast_field_values("f", [a for _, a in hits]))
