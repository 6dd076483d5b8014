"""The query history, pure Python: the record model, the analysis of an optimized plan into a
record, the buffered recorder, the reader, and the costs of executions joined to records. The
query path records into it (:mod:`accelerator.query.history`); the rule engine reads it."""
