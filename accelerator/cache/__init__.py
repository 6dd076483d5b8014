"""The persistent data cache tier: per source file, the columns queries read, as Parquet under
``spark.accelerator.cache.path`` (default ``<system path>/_cache``).

This package's core is pure Python and needs no JVM: :mod:`accelerator.cache.model` (priorities,
TTL durations, cache keys, entries and the warm-up merge rule), :mod:`accelerator.cache.policy`
(the demoter's eviction policy), :mod:`accelerator.cache.manifest` (committed entries, usage and
collection over the file-system protocol of :mod:`indexes.fs`) and :mod:`accelerator.cache.never`
(NEVER markers on source roots).
"""
