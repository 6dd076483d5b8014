"""The bucket count of a new covering index whose config and session give none: sized to the
index's data and to the session's shuffle partitions.

A bucket is one sorted file. Lookups read one bucket, so more, smaller buckets serve them
faster; a join reads its two indexes bucket by bucket, so the smaller count bounds its
parallelism; and every bucket is a file to open in a scan of the whole index. Hence: buckets of
at most :data:`BUCKET_BYTES` of index data, at least as many as the session's shuffle
partitions (the parallelism Spark's own joins would have) while each holds at least
:data:`MIN_BUCKET_BYTES`, and a power of two, so that the bucket counts of any two default
indexes divide one another and the join rule pairs them (reading the larger in the smaller
count's groups).
"""
from __future__ import annotations

#: The most index data a bucket holds by default (sizes are Spark's estimates).
BUCKET_BYTES = 128 << 20
#: Below this much data per bucket, more buckets than the data needs cost more than they save.
MIN_BUCKET_BYTES = 1 << 20
#: The most buckets by default: the largest power of two not above Spark's default shuffle
#: partitions (200).
MAX_BUCKETS = 128


def default_num_buckets(index_bytes: int, shuffle_partitions: int) -> int:
    """The bucket count of a new covering index of about ``index_bytes`` bytes in a session of
    ``shuffle_partitions`` shuffle partitions (see the module docstring): a power of two from 1
    to :data:`MAX_BUCKETS`."""
    by_size = _power_of_two_at_least(-(-max(index_bytes, 0) // BUCKET_BYTES))
    by_parallelism = _power_of_two_at_most(min(shuffle_partitions,
                                               max(index_bytes, 0) // MIN_BUCKET_BYTES))
    return min(MAX_BUCKETS, max(by_size, by_parallelism))


def _power_of_two_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _power_of_two_at_most(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)
