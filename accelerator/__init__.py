"""Secondary indexes and a local cache for PySpark queries over file data lakes.

>>> from accelerator import Hyperspace, IndexConfig
>>> hs = Hyperspace(spark)
>>> hs.createIndex(df, IndexConfig("idx", indexedColumns=["a"], includedColumns=["b"]))
>>> Hyperspace.enable(spark)
"""
from __future__ import annotations

import importlib
from typing import Any

#: where each public name is defined; imported on first use (PEP 562), so that importing a
#: submodule (the command line, which answers listings without Spark) does not load the API
_PUBLIC = {
    "Hyperspace": "accelerator.api.hyperspace", "IndexConfig": "accelerator.api.hyperspace",
    "CacheCapacityError": "accelerator.cache.model", "CacheNeverError": "accelerator.cache.model",
    "CoveringIndexConfig": "indexes.covering.config",
    **{name: "indexes.errors" for name in (
        "AcceleratorError", "CacheRequestError", "ConcurrentModificationError",
        "CorruptLogError", "ExecutorEnvironmentError", "IndexExistsError",
        "IndexNotFoundError", "IndexOperationError", "IndexStateError",
        "InvalidIndexConfigError", "JvmSetupError", "SourceNotFoundError",
        "UnsupportedSourceError")},
    **{name: "indexes.skipping.config" for name in (
        "BloomFilterSketch", "DataSkippingIndexConfig", "MinMaxSketch", "ValueListSketch")},
    "TextIndexConfig": "indexes.text.config",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'accelerator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


__all__ = [
    "Hyperspace", "IndexConfig", "CoveringIndexConfig", "DataSkippingIndexConfig",
    "MinMaxSketch", "BloomFilterSketch", "ValueListSketch", "TextIndexConfig", "AcceleratorError",
    "ConcurrentModificationError", "CorruptLogError", "ExecutorEnvironmentError",
    "IndexExistsError", "IndexNotFoundError",
    "IndexOperationError", "IndexStateError", "InvalidIndexConfigError", "JvmSetupError",
    "SourceNotFoundError", "UnsupportedSourceError", "CacheCapacityError", "CacheNeverError",
    "CacheRequestError",
]
