"""Tantivy shards of a text index: their schema, how one is written from a task's rows, and
how one answers "which files may hold a value meeting this requirement" and full-text queries.

One tantivy document per row: ``f`` the row's file (ordinal within the shard), ``r`` its row
position in the file (Parquet's ``_metadata.row_index``, -1 when unknown), ``g`` the trigrams
of the folded, anchored value (doc ids only) and ``w`` the value as tantivy's default
tokenizer sees it (words with positions, for :meth:`Shard.search`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Iterable

from indexes.text.literals import END, GRAM, START, AllOf, Has, Requirement, fold, grams

GRAMS_TOKENIZER = "accelerator_trigram"
#: A literal held by more than this share of a shard's rows, and by at least FREQUENT_ROWS of
#: them, is "frequent": the shard's files are all kept without looking them up (most files
#: hold it, and collecting its postings would cost milliseconds per shard).
FREQUENT_SHARE = 0.2
FREQUENT_ROWS = 10_000


def _tantivy() -> Any:
    import tantivy

    return tantivy


def schema() -> Any:
    t = _tantivy()
    b = t.SchemaBuilder()
    b.add_integer_field("f", fast=True, indexed=False)
    b.add_integer_field("r", fast=True, indexed=False)
    b.add_text_field("g", tokenizer_name=GRAMS_TOKENIZER, index_option="basic")
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
    """Writes one shard into a local directory from (file, row position, value) rows."""

    def __init__(self, directory: str, heap_bytes: int = 64 * 1024 * 1024):
        t = _tantivy()
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._index = _register(t.Index(schema(), path=directory))
        self._writer = self._index.writer(heap_bytes, 1)
        self.files: dict[str, int] = {}
        self.rows = 0
        self.text_bytes = 0

    def add(self, file: str, row: int, value: str | None) -> None:
        ordinal = self.files.setdefault(file, len(self.files))
        self.rows += 1
        if value is None:
            return
        t = _tantivy()
        doc = t.Document()
        doc.add_integer("f", ordinal)
        doc.add_integer("r", row)
        doc.add_text("g", indexed_form(value))
        doc.add_text("w", value)
        self._writer.add_document(doc)
        self.text_bytes += len(value.encode("utf-8", "surrogatepass"))

    def close(self) -> list[str]:
        """Commits and returns the names of the shard's files."""
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
    """An opened shard: ``files[i]`` is the source file of ordinal ``i`` (None: ignored)."""

    index: Any
    files: list[str | None]
    docs: int
    frequent_share: float = FREQUENT_SHARE

    @staticmethod
    def open(directory: str, files: list[str | None]) -> "Shard":
        t = _tantivy()
        index = _register(t.Index.open(directory))
        return Shard(index, files, index.searcher().num_docs)

    def _estimate(self, searcher: Any, req: Requirement) -> int:
        """An upper bound of the rows meeting ``req``, from document frequencies alone."""
        if isinstance(req, Has):
            return min((searcher.doc_freq("g", g) for g in grams(req.text)), default=self.docs)
        counts = [self._estimate(searcher, p) for p in req.parts]
        if isinstance(req, AllOf):
            return min(counts, default=self.docs)
        return sum(counts)

    def may_match(self, req: Requirement) -> tuple[set[str], bool]:
        """The files of this shard with a row meeting ``req`` (a superset), and whether the
        postings were looked up (False: the literal is frequent, every file is kept)."""
        known = {f for f in self.files if f is not None}
        if not known:
            return set(), False
        searcher = self.index.searcher()
        estimate = self._estimate(searcher, req)
        if estimate == 0:
            return set(), True
        if estimate > self.frequent_share * self.docs and estimate >= FREQUENT_ROWS:
            return known, False
        t = _tantivy()
        query = _gram_query(t, self.index.schema, req)
        found = searcher.aggregate(query, {"f": {"terms": {"field": "f", "size": len(self.files)}}})
        ordinals = {int(b["key"]) for b in found["f"]["buckets"]}
        return {self.files[o] for o in ordinals if o < len(self.files) and self.files[o]}, True

    def matching_rows(self, req: Requirement, limit: int) -> dict[str, set[int]] | None:
        """The row positions per file of this shard's rows that may meet ``req`` (a superset),
        or None when the postings estimate more than ``limit`` of them."""
        searcher = self.index.searcher()
        estimate = self._estimate(searcher, req)   # an upper bound of the hits
        if not any(self.files) or estimate == 0:
            return {}
        if estimate > limit:
            return None
        query = _gram_query(_tantivy(), self.index.schema, req)
        addresses = [a for _, a in searcher.search(query, limit=estimate).hits]
        out: dict[str, set[int]] = {}
        for f, r in zip(searcher.fast_field_values("f", addresses),
                        searcher.fast_field_values("r", addresses)):
            if f is not None and f < len(self.files) and self.files[f]:
                out.setdefault(self.files[f], set()).add(r)
        return out

    def search(self, query: str) -> Iterable[tuple[str, int, float]]:
        """(file, row position, score) of every row matching the full-text ``query``."""
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
