"""Errors a user can cause, each with a message naming what is wrong and what to do.

Every one is an :class:`AcceleratorError`. :class:`CacheRequestError` is the cache tier's
:class:`InvalidIndexConfigError`: a cache request or setting that cannot be carried out as asked.
"""


class AcceleratorError(Exception):
    """Base class of every error the accelerator raises on purpose."""


class InvalidIndexConfigError(AcceleratorError, ValueError):
    """The index configuration is invalid (name, columns or types)."""


class CacheRequestError(InvalidIndexConfigError):
    """A cache request or setting that cannot be carried out as asked: an unknown priority, an
    unreadable TTL, a column the source lacks or whose type Parquet cannot hold, a source read in
    a way the cache cannot copy faithfully, a cache size or usage threshold out of range."""


class UnsupportedSourceError(AcceleratorError):
    """The DataFrame does not read files directly, so no index can be built over it."""


class IndexNotFoundError(AcceleratorError, KeyError):
    """No index of that name exists in the system path."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class SourceNotFoundError(AcceleratorError):
    """The files an index was built over can no longer be read (a root path was removed)."""


class ExecutorEnvironmentError(AcceleratorError):
    """The executors' Python cannot run an index build (an interpreter or module is missing)."""


class IndexExistsError(AcceleratorError):
    """An index of that name already exists."""


class IndexStateError(AcceleratorError):
    """The index is not in a state that allows the requested operation."""


class CorruptLogError(AcceleratorError):
    """An index log entry cannot be read: unparseable, missing fields, or another entry's id
    (it was modified outside the accelerator). ``path`` is the file."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path


class ConcurrentModificationError(AcceleratorError):
    """Another process changed the index log at the same time; this operation lost the race."""


class JvmSetupError(AcceleratorError):
    """The JVM part of the accelerator could not be built or loaded."""


class UnsupportedSparkError(AcceleratorError):
    """The Spark version (pyspark's or the JVM's) is outside the supported range."""


class IndexOperationError(AcceleratorError):
    """An index operation (create, refresh, optimize, vacuum) failed on an unexpected error.

    The operation was rolled back (unless the message says the rollback failed too and to run
    ``cancel``); the original error is the ``__cause__``. ``index`` and ``operation`` name what
    failed.
    """

    def __init__(self, message: str, index: str, operation: str):
        super().__init__(message)
        self.index = index
        self.operation = operation
