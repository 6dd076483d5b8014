"""Bloom filters of a data-skipping index: the two stored formats and membership.

Format 2 (:class:`HashBloom`, what builds write): a filter over the 64-bit hash Spark's
``xxhash64`` gives a value (seed 42), so the build's tasks hash every row in the JVM and only
set bits in Python (numpy), and a query hashes a literal in Python exactly as Spark hashed the
column's values (:func:`value_hash`: Spark's XXH64 of a value's internal form, by type). A value
sets ``k`` bits (:func:`bit_positions`: splitmix64's finalizer of ``h + (i + 1) * golden``
modulo ``m`` for ``i < k``), ``m = -n ln(p) / ln(2)^2`` bits for capacity ``n`` and false-positive rate ``p``, ``k =
round(m/n ln 2)``. Stored as 40 bytes, ``MAGIC``, ``k``, ``m``, the capacity and the count
(little-endian uint64s), then the bits (bit ``j`` in byte ``j // 8``, at ``1 << j % 8``).

Format 1 (before, still read): a ``pybloom_live`` BloomFilter over :func:`legacy_key` strings,
stored by its ``tofile`` (``<dQQQQ``: error rate, slices, bits per slice, capacity, count,
then the bits). Its first 8 bytes are a false-positive rate in (0, 1); format 2's ``MAGIC``
reads as a NaN there, so every stored filter says its own format.

Membership is answered by value and type (:func:`may_hold`, :func:`positions`): a value a
filter of its type cannot hold (a decimal with more digits than the type's, an integer out of
range) is held by none; a value whose hash is not known (a string Python cannot encode) is
held by all. Soundness (no false negative) rests on :func:`value_hash` equal to Spark's
``xxhash64`` of the same value (``tests/test_skipping_bloom.py`` compares them for every type).
"""
from __future__ import annotations

import functools
import math
import struct
from decimal import Context, Decimal
from typing import Any

from indexes.skipping import values as V

#: the format builds write (a version's content records it as ``bloomFormat``)
FORMAT = 2
#: format 2's first 8 bytes (a NaN as a double: never a format 1 filter's error rate)
MAGIC = b"XXH64\x02\xff\x7f"
HEADER = 40
#: the seed of Spark's ``xxhash64``
SEED = 42
_M64 = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_WIDE = Context(prec=200)
_GOLDEN = 0x9E3779B97F4A7C15
#: :func:`value_hash` of a value whose hash is not known (every filter may hold it)
UNKNOWN = -1


# --- Spark's xxhash64 in Python ----------------------------------------------------------------
def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M64, 31) * _P1) & _M64


def xxh64(data: bytes, seed: int = SEED) -> int:
    """XXH64 of ``data`` (unsigned), as Spark's ``XXH64.hashUnsafeBytes`` computes it."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed & _M64, (seed - _P1) & _M64]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], int.from_bytes(data[i + 8 * j:i + 8 * j + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for x in v:
            h = ((h ^ _round(0, x)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    return h ^ (h >> 32)


def _unscaled(value: Any, precision: int, scale: int) -> int | None:
    """A decimal value's unscaled integer in ``decimal(precision, scale)``, None when the type
    cannot hold it exactly."""
    shifted = Decimal(value).scaleb(scale, _WIDE)
    if shifted != shifted.to_integral_value(context=_WIDE):
        return None
    n = int(shifted)
    return n if abs(n) < 10 ** precision else None


@functools.lru_cache(maxsize=1 << 14, typed=True)
def value_hash(value: Any, type_: str) -> int | None:
    """Spark's ``xxhash64`` (unsigned) of a non-null internal value of ``type_``, as the build
    computed it for a sketch of that type; None when no value of the type equals it,
    :data:`UNKNOWN` when its hash cannot be known."""
    if type_ == "boolean":
        return xxh64(struct.pack("<i", 1 if value else 0))
    integral = V.integral_range(type_)
    if integral is not None or type_ == "date":
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        lo, hi = integral if integral is not None else (-(1 << 31), (1 << 31) - 1)
        if not lo <= value <= hi:
            return None
        return xxh64(struct.pack("<q" if type_ == "long" else "<i", value))
    if type_ in ("timestamp", "timestamp_ntz"):
        return xxh64(struct.pack("<q", value)) if -(1 << 63) <= value < (1 << 63) else None
    if type_ == "float":
        value = V.normalize(value, type_)
        if math.isnan(value):
            return xxh64(struct.pack("<I", 0x7FC00000))
        try:
            if V.to_float32(value) != value:
                return None
        except OverflowError:
            return None
        return xxh64(struct.pack("<f", value))
    if type_ == "double":
        value = V.normalize(value, type_)
        return xxh64(struct.pack("<Q", 0x7FF8000000000000) if math.isnan(value)
                     else struct.pack("<d", value))
    decimal = V.decimal_type(type_)
    if decimal is not None:
        n = _unscaled(value, *decimal)
        if n is None:
            return None
        if decimal[0] <= 18:
            return xxh64(struct.pack("<q", n))
        length = (n if n >= 0 else ~n).bit_length() // 8 + 1   # BigInteger.toByteArray
        return xxh64(n.to_bytes(length, "big", signed=True))
    if type_ == "string":
        try:
            return xxh64(value.encode("utf-8"))
        except UnicodeEncodeError:
            return UNKNOWN
    if type_ == "binary":
        return xxh64(bytes(value))
    return UNKNOWN


def hash_expression(expression: str, type_: str) -> str:
    """The SQL the build hashes a sketch's values with: ``xxhash64`` of the value (-0.0 as 0.0
    for floats, which Spark compares equal), null for null."""
    if V.is_floating(type_):
        zero = "CAST(0 AS FLOAT)" if type_ == "float" else "CAST(0 AS DOUBLE)"
        value = f"IF(({expression}) = 0, {zero}, ({expression}))"
    else:
        value = f"({expression})"
    return f"IF(({expression}) IS NULL, NULL, xxhash64({value}))"


# --- format 2 --------------------------------------------------------------------------------
def dimensions(capacity: int, fpp: float) -> tuple[int, int]:
    """(k, m): hashes per value and bits of a filter of ``capacity`` values at rate ``fpp``."""
    m = max(8, int(math.ceil(-capacity * math.log(fpp) / math.log(2) ** 2)))
    return max(1, int(round(m / capacity * math.log(2)))), m


def _mix(x: int) -> int:
    """splitmix64's finalizer of a uint64."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def hash_positions(hashes: Any, k: int, m: int) -> Any:
    """The bits ``hashes`` (numpy uint64) set in a filter of ``k`` hashes over ``m`` bits, as a
    (values × k) numpy array (see :func:`bit_positions`)."""
    import numpy as np

    x = hashes.astype(np.uint64)[:, None] + np.arange(1, k + 1, dtype=np.uint64)[None, :] \
        * np.uint64(_GOLDEN)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (x ^ (x >> np.uint64(31))) % np.uint64(m)


def bit_positions(h: int, k: int, m: int) -> list[int]:
    """The ``k`` bits a value of hash ``h`` sets in a filter of ``m`` bits: bit ``i`` is
    splitmix64's finalizer of ``h + (i + 1) * golden ratio`` modulo ``m`` (independent bits
    from one 64-bit hash, so a filter holding few values stays far below its rate)."""
    return [_mix((h + (i + 1) * _GOLDEN) & _M64) % m for i in range(k)]


class HashBloom:
    """A format 2 filter (see the module docstring): ``bits`` numpy uint8, ``count`` the
    distinct values it holds."""

    def __init__(self, k: int, m: int, capacity: int, count: int, bits: Any):
        self.k, self.m, self.capacity, self.count, self.bits = k, m, capacity, count, bits

    @staticmethod
    def of_hashes(hashes: Any, capacity: int, fpp: float) -> "HashBloom":
        """The filter of capacity ``capacity`` holding the distinct hashes ``hashes`` (numpy
        uint64)."""
        import numpy as np

        k, m = dimensions(capacity, fpp)
        flags = np.zeros(m, dtype=bool)
        for lo in range(0, len(hashes), 1 << 16):
            flags[hash_positions(hashes[lo:lo + (1 << 16)], k, m).ravel().astype(np.int64)] = True
        return HashBloom(k, m, capacity, len(hashes), np.packbits(flags, bitorder="little"))

    def to_bytes(self) -> bytes:
        return MAGIC + struct.pack("<QQQQ", self.k, self.m, self.capacity, self.count) \
            + self.bits.tobytes()

    @staticmethod
    def from_bytes(data: bytes) -> "HashBloom":
        import numpy as np

        k, m, capacity, count = struct.unpack_from("<QQQQ", data, 8)
        return HashBloom(k, m, capacity, count, np.frombuffer(data, np.uint8, offset=HEADER))

    def may_hold(self, value: Any, type_: str) -> bool:
        """Whether a value (internal form of ``type_``, this filter's type) may be held."""
        found = _positions(MAGIC, self.k, self.m, value, type_)
        return found is None or bool(found) and all(self.bits[p >> 3] >> (p & 7) & 1
                                                    for p in found)


# --- both formats ----------------------------------------------------------------------------
def legacy_key(value: Any, type_: str) -> str:
    """Format 1's key of a value: one string per value, equal for values Spark considers equal
    (whatever the decimal type)."""
    return V.bloom_key(value, type_)


def is_hash_bloom(head: bytes) -> bool:
    """Whether stored bytes (their first 8 at least) are a format 2 filter."""
    return bytes(head[:8]) == MAGIC


def from_bytes(data: bytes) -> Any:
    """A stored filter of either format."""
    if is_hash_bloom(data):
        return HashBloom.from_bytes(data)
    import io

    from pybloom_live import BloomFilter

    return BloomFilter.fromfile(io.BytesIO(data))


def to_bytes(bloom: Any) -> bytes:
    """The stored form of a filter of either format."""
    if isinstance(bloom, HashBloom):
        return bloom.to_bytes()
    import io

    out = io.BytesIO()
    bloom.tofile(out)
    return out.getvalue()


def may_hold(bloom: Any, value: Any, type_: str) -> bool:
    """Whether ``bloom`` (either format), a filter of values of ``type_``, may hold ``value``."""
    if isinstance(bloom, HashBloom):
        return bloom.may_hold(value, type_)
    return legacy_key(value, type_) in bloom


def _positions(magic: bytes, a: int, b: int, value: Any, type_: str) -> list[int] | None:
    """The bits a value sets in a stored filter whose header's first 24 bytes are ``magic, a,
    b``; [] when no filter of the type holds it, None when any may."""
    if magic == MAGIC:
        h = value_hash(value, type_)
        if h is None:
            return []
        if h == UNKNOWN:
            return None
        return bit_positions(h, a, b)
    from pybloom_live.pybloom import make_hashfuncs

    hashes, _ = make_hashfuncs(a, b)
    return [s * b + k for s, k in enumerate(hashes(legacy_key(value, type_)))]


def positions(head: bytes, value: Any, type_: str) -> list[int] | None:
    """The bits (after the 40-byte header) ``value`` sets in a stored filter whose header
    starts with ``head`` (24 bytes at least; either format); [] when the filter cannot hold
    it, None when it may whatever its bits."""
    a, b = struct.unpack_from("<QQ", head, 8)
    return _positions(bytes(head[:8]) if is_hash_bloom(head) else b"", a, b, value, type_)
