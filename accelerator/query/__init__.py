"""The query path: the optimizer rule's Python side. The session turns it on; for each plan the
rewriter decides, per file relation, which index kind or the cache serves it, serves it, and
records the query in the history."""
