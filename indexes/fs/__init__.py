"""File-system access for index logs, lifecycle and data: one protocol, two implementations and
a local reader.

:class:`FileSystem` (:mod:`indexes.fs.protocol`) lists what the accelerator needs from a file
system. :class:`HadoopFs` (:mod:`indexes.fs.hadoop`) implements it through py4j over Hadoop's
``FileSystem``, so index logs work on any file system Spark can write. :class:`MemoryFs`
(:mod:`indexes.fs.memory`) implements it in memory with the same semantics, so the log and the
lifecycle are testable without a JVM. :class:`LocalFs` (:mod:`indexes.fs.local`) only reads
the local disk in Python, for what reads a local system path without starting Spark.
:func:`in_parallel` (:mod:`indexes.fs.parallel`) makes many
file-system calls at once; :mod:`indexes.fs.exclusive` creates a local file or an S3 object only
if it is absent, atomically.

All paths are strings (URIs or local paths).
"""
from indexes.fs.hadoop import HadoopFs
from indexes.fs.local import LocalFs
from indexes.fs.memory import MemoryFs
from indexes.fs.parallel import in_parallel
from indexes.fs.protocol import FileInfo, FileSystem

__all__ = ["FileInfo", "FileSystem", "HadoopFs", "LocalFs", "MemoryFs", "in_parallel"]
