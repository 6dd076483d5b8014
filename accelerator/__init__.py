"""Secondary indexes and a local cache for PySpark queries over file data lakes.

>>> from accelerator import Hyperspace, IndexConfig
>>> hs = Hyperspace(spark)
>>> hs.createIndex(df, IndexConfig("idx", indexedColumns=["a"], includedColumns=["b"]))
>>> Hyperspace.enable(spark)
"""
from accelerator.api.hyperspace import Hyperspace, IndexConfig
from accelerator.cache.model import CacheCapacityError, CacheNeverError
from indexes.covering.config import CoveringIndexConfig
from indexes.errors import (
    AcceleratorError,
    CacheRequestError,
    ConcurrentModificationError,
    CorruptLogError,
    ExecutorEnvironmentError,
    IndexExistsError,
    IndexNotFoundError,
    IndexOperationError,
    IndexStateError,
    InvalidIndexConfigError,
    JvmSetupError,
    SourceNotFoundError,
    UnsupportedSourceError,
)
from indexes.skipping.config import (
    BloomFilterSketch,
    DataSkippingIndexConfig,
    MinMaxSketch,
    ValueListSketch,
)
from indexes.text.config import TextIndexConfig

__all__ = [
    "Hyperspace", "IndexConfig", "CoveringIndexConfig", "DataSkippingIndexConfig",
    "MinMaxSketch", "BloomFilterSketch", "ValueListSketch", "TextIndexConfig", "AcceleratorError",
    "ConcurrentModificationError", "CorruptLogError", "ExecutorEnvironmentError",
    "IndexExistsError", "IndexNotFoundError",
    "IndexOperationError", "IndexStateError", "InvalidIndexConfigError", "JvmSetupError",
    "SourceNotFoundError", "UnsupportedSourceError", "CacheCapacityError", "CacheNeverError",
    "CacheRequestError",
]
