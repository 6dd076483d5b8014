"""A differential fuzzer: random data, indexes of every kind and queries, each query's rows
compared with vanilla Spark's (``python -m tests.fuzz --seconds 1800 --seed 7``)."""
