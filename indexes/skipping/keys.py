"""Order keys of many values at once: Arrow arrays of internal values (as the statistics hold
them) as numpy int64 keys ordered as Spark orders the values (integral, date, timestamp,
decimal of up to 18 digits by its unscaled value, floating with NaN above +Infinity and
-0.0 = 0.0), strings and binaries as they are (Arrow and Python order them as Spark does),
and comparisons over them as numpy masks."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from indexes.skipping import values as V
from indexes.skipping.store import arrow_type

_SIGN_FREE = 0x7FFF_FFFF_FFFF_FFFF
_LONG = V.integral_range("long")


def valid(array: Any) -> Any:
    """A numpy mask of the non-null values of an Arrow array."""
    import numpy as np

    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    return array.is_valid().to_numpy(zero_copy_only=False)


def _numeric(type_: str) -> bool:
    return bool(V.integral_range(type_) or V.is_floating(type_) or V.decimal_type(type_)
                or type_ in ("date", "timestamp", "timestamp_ntz"))


def _float_keys(x: Any) -> Any:
    """int64 keys ordering doubles as Spark does (NaN above +Infinity, -0.0 = 0.0)."""
    import numpy as np

    x = np.where(np.isnan(x), np.nan, x + 0.0)
    bits = x.view(np.int64)
    return bits ^ ((bits >> 63) & _SIGN_FREE)


def order_keys(array: Any, type_: str) -> Any:
    """The order keys of an Arrow array of internal values (junk where null): numpy int64
    for the numeric types, the array itself for strings and binaries; None when not kept so
    (decimals of more than 18 digits)."""
    import numpy as np
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if V.is_floating(type_):
        return _float_keys(array.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False))
    if V.decimal_type(type_):
        if V.decimal_type(type_)[0] > 18:
            return None
        array = array.cast(arrow_type(type_))
        words = np.frombuffer(array.buffers()[1], dtype="<i8")
        return words[2 * array.offset:2 * (array.offset + len(array)):2].copy()
    if _numeric(type_):
        return array.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return array


def scalar_key(value: Any, type_: str) -> Any:
    """The order key of one internal value, as :func:`order_keys` gives them; None when not kept
    so (a decimal of more than 18 digits, an integer beyond a long)."""
    import numpy as np
    import pyarrow as pa

    if V.is_floating(type_):
        return int(_float_keys(np.array([float(value)]))[0])
    if V.decimal_type(type_):
        precision, scale = V.decimal_type(type_)
        unscaled = Decimal(value).scaleb(scale)
        if precision > 18 or unscaled != unscaled.to_integral_value():
            return None
        return int(unscaled)
    if _numeric(type_):
        return int(value) if _LONG[0] <= value <= _LONG[1] else None
    if type_ in ("string", "binary"):
        return pa.scalar(value, arrow_type(type_))
    return None


def compare(a: Any, b: Any, op: str, n: int) -> Any:
    """``a op b`` (op one of < <= =) over order keys (numpy, Arrow or scalars) as a numpy mask
    of ``n`` files; junk where either is unbounded."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if a is None or b is None:
        return np.zeros(n, dtype=bool)
    if isinstance(a, (pa.Array, pa.Scalar)) or isinstance(b, (pa.Array, pa.Scalar)):
        fn = {"<": pc.less, "<=": pc.less_equal, "=": pc.equal}[op]
        found = fn(a, b)
        if isinstance(found, pa.Scalar):
            return np.full(n, bool(found.as_py()))
        return found.fill_null(False).to_numpy(zero_copy_only=False)
    found = a < b if op == "<" else a <= b if op == "<=" else a == b
    return np.broadcast_to(np.asarray(found, dtype=bool), (n,))
