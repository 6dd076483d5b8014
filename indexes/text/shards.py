"""Tantivy shards of a text index: their schema, how one is written from a task's rows, and
how one answers "which files may hold a value meeting this requirement" and full-text queries.

A shard holds documents of one of two layouts (its manifest's ``docs``):

- ``groups`` (the default): one document per group of at most :data:`GROUP_ROWS` consecutive
  rows of one file, within one row group when the file's layout is known: ``f`` the file
  (ordinal within the shard), ``r`` and ``e`` its first and last row position in the file
  (Parquet's ``_metadata.row_index``, -1 when unknown), ``g`` the trigrams of its folded,
  anchored values and ``w`` their words as tantivy's default tokenizer sees them, both as doc
  ids only. Postings per group rather than per row make the index a small fraction of the
  column; a full-text query is relaxed to what a group holds (:mod:`indexes.text.relax`).
- ``rows`` (``TextIndexConfig(scoring=True)`` and indexes built before groups): one document
  per row, ``f``, ``r`` and ``g`` as above and ``w`` with word positions, so a query matches
  rows exactly and gets tantivy's BM25 score per row (:meth:`Shard.search`).
"""
from __future__ import annotations

import bisect
import functools
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable

from indexes.text import relax
from indexes.text.literals import END, GRAM, START, AllOf, Has, Requirement, fold, grams

GRAMS_TOKENIZER = "accelerator_trigram"
#: A literal held by more than this share of a shard's rows, and by at least FREQUENT_ROWS of
#: them, is "frequent": the shard's files are all kept without looking them up (most files
#: hold it, and collecting its postings would cost milliseconds per shard).
FREQUENT_SHARE = 0.2
FREQUENT_ROWS = 10_000
#: The most rows one document of a grouped shard holds.
GROUP_ROWS = 10_000


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
    b.add_text_field("w", tokenizer_name="default",
                     index_option="basic" if grouped else "position")
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
    """Writes one shard into a local directory from (file, row position, value) rows.

    ``grouped``: one document per group of rows (see the module's docstring), cut where the
    file changes, the row group changes (``first_rows``: per file, the first row of each of its
    row groups, ascending), the rows stop ascending, or the group reaches :data:`GROUP_ROWS`."""

    def __init__(self, directory: str, heap_bytes: int = 64 * 1024 * 1024, grouped: bool = False,
                 first_rows: dict[str, list[int]] | None = None):
        t = _tantivy()
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.grouped = grouped
        self._index = _register(t.Index(schema(grouped), path=directory))
        self._writer = self._index.writer(heap_bytes, 1)
        self._first_rows = first_rows or {}
        self._group: tuple | None = None     # (file ordinal, row group, first row, last row)
        self._doc: Any = None
        self._doc_rows = 0
        self.files: dict[str, int] = {}
        self.rows = 0
        self.text_bytes = 0

    def add(self, file: str, row: int, value: str | None) -> None:
        ordinal = self.files.setdefault(file, len(self.files))
        self.rows += 1
        if self.grouped:
            self._add_to_group(file, ordinal, row, value)
            return
        if value is None:
            return
        doc = _tantivy().Document()
        doc.add_integer("f", ordinal)
        doc.add_integer("r", row)
        self._add_value(doc, value)
        self._writer.add_document(doc)

    def _add_value(self, doc: Any, value: str) -> None:
        doc.add_text("g", indexed_form(value))
        doc.add_text("w", value)
        self.text_bytes += len(value.encode("utf-8", "surrogatepass"))

    def _add_to_group(self, file: str, ordinal: int, row: int, value: str | None) -> None:
        starts = self._first_rows.get(file)
        group = bisect.bisect_right(starts, row) if starts else 0
        current = self._group
        if (current is None or current[:2] != (ordinal, group) or row < current[3]
                or self._doc_rows >= GROUP_ROWS):
            self._flush()
            current = (ordinal, group, row, row)
        self._group = current[:3] + (row,)
        self._doc_rows += 1
        if value is not None:
            if self._doc is None:
                self._doc = _tantivy().Document()
            self._add_value(self._doc, value)

    def _flush(self) -> None:
        """Adds the current group's document (if any of its rows holds a value)."""
        if self._doc is not None and self._group is not None:
            ordinal, _, first, last = self._group
            self._doc.add_integer("f", ordinal)
            self._doc.add_integer("r", first)
            self._doc.add_integer("e", last)
            self._writer.add_document(self._doc)
        self._doc, self._group, self._doc_rows = None, None, 0

    def close(self) -> list[str]:
        """Commits and returns the names of the shard's files."""
        self._flush()
        self._writer.commit()
        self._writer.wait_merging_threads()
        return sorted(os.listdir(self.directory))


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
        searcher = self.index.searcher()
        if not self.grouped:
            return self._files_of(searcher, parse(self.index, query))
        relaxed = relax.relax(query, _default_analyzer().analyze)
        if relaxed is None:
            return {f for f in self.files if f is not None}
        return self._files_of(searcher, _relaxed_query(_tantivy(), self.index.schema, relaxed))

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


def _relaxed_query(t: Any, sch: Any, relaxed: relax.Relaxed) -> Any:
    if isinstance(relaxed, relax.Words):
        return t.Query.boolean_query([(t.Occur.Must, t.Query.term_query(sch, "w", w))
                                      for w in relaxed.words])
    if isinstance(relaxed, relax.Prefix):
        return t.Query.regex_query(sch, "w", re.escape(relaxed.text) + ".*")
    occur = t.Occur.Must if relaxed.all else t.Occur.Should
    return t.Query.boolean_query([(occur, _relaxed_query(t, sch, p)) for p in relaxed.parts])


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
