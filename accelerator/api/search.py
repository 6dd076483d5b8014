"""``Hyperspace.search``: checks that a text index can answer a full-text query over a
DataFrame, then runs it (:mod:`indexes.text.search`) with the rewrite suspended."""
from __future__ import annotations

from pyspark.sql import DataFrame

from accelerator.context import AcceleratorContext
from accelerator.query import session
from indexes import kinds
from indexes.errors import InvalidIndexConfigError
from indexes.log import IndexState
from indexes.source import same_source, source_mismatch, source_name
from indexes.text import search as text_search


def search(context: AcceleratorContext, df: DataFrame, index_name: str, query: str,
           score: bool) -> DataFrame:
    """The rows of ``df`` whose column indexed by ``index_name`` matches ``query`` (see
    :meth:`accelerator.api.hyperspace.Hyperspace.search` for what is raised when)."""
    entry = context.lifecycle().get(index_name)
    if not getattr(kinds.kind_of(entry), "searchable", False):
        raise InvalidIndexConfigError(
            f"index '{entry.name}' is a {kinds.display_name(entry)}; search needs a text index "
            "(TextIndexConfig)")
    if entry.state is not IndexState.ACTIVE:
        raise InvalidIndexConfigError(
            f"index '{entry.name}' is {entry.state}; search needs an ACTIVE index")
    source = context.sources.describe_source(df)
    if not same_source(entry.source, source):
        raise InvalidIndexConfigError(
            f"index '{entry.name}' is over {source_name(entry.source)}, "
            f"the DataFrame reads {source_name(source)}")
    mismatch = source_mismatch(entry.source, source, source.schema, check_files=False)
    if mismatch:
        raise InvalidIndexConfigError(f"index '{entry.name}' cannot answer this DataFrame: "
                                      f"{mismatch}; refresh the index")
    if score and source.read_format != "parquet":
        raise InvalidIndexConfigError(
            f"index '{entry.name}': score=True needs a Parquet source (rows are matched to "
            f"the index by their position in the file); the source is {source.read_format}")
    try:
        text_search.check_query(query)
    except ValueError as e:
        raise InvalidIndexConfigError(
            f"index '{entry.name}': invalid full-text query {query!r}: {e}") from None
    reader = session.rewriter(context.spark).state(entry, context.settings())
    if score and not reader.scores_rows():
        raise InvalidIndexConfigError(
            f"index '{entry.name}': score=True needs an index of one document per row; this "
            "one holds groups of rows: recreate it with TextIndexConfig(..., scoring=True)")
    context.sources.prepare_executors(kinds.kind_of(entry))
    with session.suspended(context.spark):
        return text_search.search(context.sources.files_frame(df), entry, source, reader,
                                  query, score)
