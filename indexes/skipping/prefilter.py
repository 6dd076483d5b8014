"""A first pass of the data-skipping rule that scales to many files: the conjuncts of a filter
that compare a sketched expression with literals, checked against the files' min/max bounds
sorted once per index version (a point lookup reads a few of them, not every file), then, for
equality and IN, against the Bloom filters of the files the bounds leave (vectorized over the
filters' stored bytes), before the evaluator judges the files that pass one by one.

Contract: it rules out only files :func:`evaluator.may_match` rules out too, so pruning keeps
exactly the files the evaluator alone keeps (tested on random filters and statistics). It
reads the conjuncts the evaluator answers from bounds alone (``=``, ``<=>``, ``<``, ``<=``,
``>``, ``>=`` with a non-null literal, IN with literals), and only for filters that raise on no
file whatever its statistics (then a conjunct true on no row makes the filter true on none).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexes.skipping import bloom as B
from indexes.skipping import evaluator
from indexes.skipping import keys as K
from indexes.skipping import values as V
from indexes.skipping.ir import And, Cmp, In, Lit, Node, Sketched
from indexes.skipping.stats import FileStats

_FLIPPED = {"=": "=", "<=>": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_UNKNOWN = FileStats(None, {})


@dataclass(frozen=True)
class Test:
    """A conjunct ``sketched op literal`` (``op`` one of = < <= > >=, the literal ``value`` in
    internal form), or ``sketched IN points`` (``op`` "in", ``value`` a tuple of them)."""

    key: str
    type: str
    op: str
    value: Any
    points: tuple = ()    # for = and in: the literals, normalized (what Bloom filters hold)


def _conjuncts(node: Node) -> list[Node]:
    if isinstance(node, And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _sketched(node: Node) -> Sketched | None:
    """A sketched expression whose value the statistics bound whatever the mode."""
    if isinstance(node, Sketched) and node.guard is None and node.type != "unknown" \
            and V.is_orderable(node.type):
        return node
    return None


def _literal(node: Node, type_: str) -> Lit | None:
    if isinstance(node, Lit) and node.value is not None and node.type == type_:
        return node
    return None


def _test(node: Node) -> Test | None:
    if isinstance(node, Cmp):
        for column, other, op in ((node.left, node.right, node.op),
                                  (node.right, node.left, _FLIPPED[node.op])):
            s = _sketched(column)
            lit = _literal(other, s.type) if s is not None else None
            if lit is not None:
                return Test(s.key, s.type, "=" if op == "<=>" else op, lit.value,
                            _points([lit.value], s.type))
    if isinstance(node, In):
        s = _sketched(node.value)
        if s is not None and node.items and all(
                isinstance(i, Lit) and i.type == s.type for i in node.items):
            present = [i.value for i in node.items if i.value is not None]
            return Test(s.key, s.type, "in", tuple(present), _points(present, s.type))
    return None


def _points(values: list, type_: str) -> tuple:
    return tuple(V.normalize(v, type_) for v in values)


def tests(condition: Node) -> list[Test]:
    """The conjuncts of ``condition`` the first pass checks; none when the filter may raise."""
    found = [t for t in map(_test, _conjuncts(condition)) if t is not None]
    if not found or evaluator.evaluate(condition, _UNKNOWN).fallible:
        return []
    return found


class Bounds:
    """Every file's bounds of one sketched expression, as order keys (:mod:`keys`: numpy
    int64, or Python strings and binaries), from an index's table (a
    :class:`indexes.skipping.table.StatsTable`, files numbered 0..n-1), sorted so a test reads
    only the files that may pass it: files with both bounds of the type by lower bound (with
    the running maximum of the upper bounds) and by upper bound; the other files (never ruled
    out here) in ``unbounded``."""

    def __init__(self, table: Any, key: str, type_: str):
        import numpy as np

        self.count, self.type = len(table), type_
        found = table.sketch_columns(key, type_, np.arange(self.count))
        lo = hi = None
        if found is not None:
            lo, hi = K.order_keys(found["min"], type_), K.order_keys(found["max"], type_)
        if lo is None:        # no bounds (or not kept as keys): every file passes
            lo = hi = np.zeros(self.count, dtype=np.int64)
            ok = np.zeros(self.count, dtype=bool)
        else:
            ok = found["known"] & K.valid(found["min"]) & K.valid(found["max"])
        self._numeric = isinstance(lo, np.ndarray)
        if not self._numeric:
            lo, hi = (np.array(b.to_pylist(), dtype=object) for b in (lo, hi))
        self.unbounded = np.flatnonzero(~ok)
        bounded = np.flatnonzero(ok)
        order = np.argsort(lo[bounded], kind="stable")
        self._files = bounded[order]
        self._lo, self._hi = lo[self._files], hi[self._files]
        self._hi_so_far = np.maximum.accumulate(self._hi) if len(self._hi) else self._hi
        self._files_by_hi = bounded[np.argsort(hi[bounded], kind="stable")]
        self._hi_sorted = hi[self._files_by_hi]

    def _key(self, value: Any) -> Any:
        return K.scalar_key(value, self.type) if self._numeric else value

    def _holding(self, v: Any, out: Any) -> None:
        """Marks the files whose [lo, hi] holds ``v``: among the files with lo <= v, those
        from the first whose running maximum of upper bounds reaches v, with hi >= v."""
        import numpy as np

        last = np.searchsorted(self._lo, v, "right")
        first = np.searchsorted(self._hi_so_far, v, "left")
        if first < last:
            out[self._files[first:last][np.asarray(self._hi[first:last] >= v, dtype=bool)]] = True

    def passing(self, test: Test) -> Any:
        """A numpy mask of the files whose bounds may hold a value passing ``test``."""
        import numpy as np

        op = test.op
        found = np.zeros(self.count, dtype=bool)
        found[self.unbounded] = True
        probes = [self._key(x) for x in (test.value if op == "in" else (test.value,))]
        if any(p is None for p in probes):     # a literal kept as no key: none ruled out
            found[:] = True
        if found.all():
            return found
        if op in ("=", "in"):
            for v in probes:
                self._holding(v, found)
            return found
        v = probes[0]
        if op in ("<", "<="):
            found[self._files[:np.searchsorted(self._lo, v, "left" if op == "<" else "right")]] = True
        else:
            found[self._files_by_hi[np.searchsorted(self._hi_sorted, v,
                                                    "right" if op == ">" else "left"):]] = True
        return found


#: an equality or IN test is checked against Bloom filters up to this many literals
BLOOM_POINTS = 64


def _bits_set(data: Any, base: Any, found: list[int]) -> Any:
    """Which filters (their bits starting at the numpy offsets ``base`` of ``data``) have every
    bit of ``found`` set."""
    import numpy as np

    has = np.ones(len(base), dtype=bool)
    for p in found:
        has &= (data[base + p // 8] >> (p % 8)) & 1 == 1
    return has


def _without_values(blooms: Any, at: Any, values: tuple, type_: str) -> Any:
    """A numpy mask of the filters (``blooms`` at ``at``, all of it when None: an Arrow binary
    array of stored filters of either format, nulls for none) of values of ``type_`` that hold
    none of ``values``."""
    import numpy as np
    import pyarrow as pa

    if isinstance(blooms, pa.ChunkedArray):
        blooms = blooms.combine_chunks()
    uniform = _uniform_without(blooms, at, values, type_)
    if uniform is not None:
        return uniform
    at = np.arange(len(blooms)) if at is None else at
    out = np.zeros(len(at), dtype=bool)
    offsets = np.frombuffer(blooms.buffers()[1], dtype=np.int32)[
        blooms.offset:blooms.offset + len(blooms) + 1]
    if blooms.buffers()[2] is None:
        return out
    data = np.frombuffer(blooms.buffers()[2], dtype=np.uint8)
    starts = offsets[:-1][at].astype(np.int64)
    valid = offsets[1:][at] - starts >= B.HEADER        # a null's length is 0
    if blooms.null_count:
        valid &= blooms.is_valid().to_numpy(zero_copy_only=False)[at]
    some = np.flatnonzero(valid)
    if not len(some):
        return out
    heads = data[starts[some, None] + np.arange(24)]   # format and dimensions
    if (heads == heads[0]).all():
        kinds, which = heads[:1], np.zeros(len(some), dtype=np.int64)
    else:
        kinds, which = np.unique(heads, axis=0, return_inverse=True)
        which = np.asarray(which).reshape(-1)
    for j, head in enumerate(kinds):
        these = some[which == j]
        base = starts[these] + B.HEADER
        held = np.zeros(len(these), dtype=bool)
        for value in values:
            found = B.positions(head.tobytes(), value, type_)
            held |= True if found is None else bool(found) and _bits_set(data, base, found)
        out[these] = ~held
    return out


def _uniform_without(blooms: Any, at: Any, values: tuple, type_: str) -> Any:
    """:func:`_without_values` over filters of one format and size, read as the rows of one
    matrix (a column of bytes per bit looked up); None when they are not."""
    import numpy as np

    matrix, valid = _filters(blooms)
    if matrix is None or matrix.shape[1] < B.HEADER:
        return None
    rows, ok = (matrix, valid) if at is None else (matrix[at], valid[at])
    heads = rows[ok, :24]
    if not len(heads) or not (heads == heads[0]).all():
        return None
    head = heads[0].tobytes()
    held = np.zeros(len(rows), dtype=bool)
    for value in values:
        found = B.positions(head, value, type_)
        if found is None:
            return np.zeros(len(rows), dtype=bool)
        if found:
            has = ok.copy()
            for p in found:
                has &= (rows[:, B.HEADER + p // 8] >> (p % 8)) & 1 == 1
            held |= has
    return ok & ~held


def _filters(blooms: Any) -> tuple[Any, Any]:
    """``(matrix, valid)``: the stored filters of an Arrow binary array as the rows of one
    numpy matrix (files × bytes; the rows of files without one are zeros) and which files have
    one; matrix None when there is none or they differ in length."""
    import numpy as np

    if blooms.buffers()[2] is None:
        return None, None
    n = len(blooms)
    offsets = np.frombuffer(blooms.buffers()[1], dtype=np.int32)[
        blooms.offset:blooms.offset + n + 1].astype(np.int64)
    data = np.frombuffer(blooms.buffers()[2], dtype=np.uint8)
    lengths = offsets[1:] - offsets[:-1]
    valid = lengths > 0
    if blooms.null_count:
        valid &= blooms.is_valid().to_numpy(zero_copy_only=False)
    some = np.flatnonzero(valid)
    if not len(some) or (lengths[some] != lengths[some[0]]).any():
        return None, valid
    width = int(lengths[some[0]])
    if len(some) == n:          # one run of equal filters: the buffer itself
        return data[offsets[0]:offsets[0] + n * width].reshape(n, width), valid
    matrix = np.zeros((n, width), dtype=np.uint8)
    for lo in range(0, len(some), 1 << 16):
        rows = some[lo:lo + (1 << 16)]
        matrix[rows] = data[offsets[rows, None] + np.arange(width)]
    return matrix, valid


class BloomSlices:
    """Every file's Bloom filter of one sketch, bit-sliced: for each bit of the filters (all of
    one size), a bitmap over the files, so a lookup ANDs a few bitmaps instead of reading every
    filter. Files without a filter have every bit set (never ruled out)."""

    def __init__(self, matrix: Any, valid: Any):
        """``matrix``: each file's stored filter as a row (:func:`_filters`), all of one format
        and equal dimensions (else :meth:`of` gives None); ``valid``: the files that have one."""
        import numpy as np

        header = B.HEADER
        self.count, self.valid = len(matrix), valid
        first = int(np.flatnonzero(valid)[0])
        self.header = matrix[first, :header - 8].tobytes()     # all but the count
        self.missing = np.packbits(~valid, bitorder="little")
        self.counts = np.ascontiguousarray(matrix[:, header - 8:header]).view("<u8")[:, 0].copy()
        self.width = matrix.shape[1] - header
        self.map = np.empty((self.width * 8, (self.count + 7) // 8), dtype=np.uint8)
        step = 1 << 18
        for lo in range(0, self.count, step):
            block = np.ascontiguousarray(matrix[lo:lo + step, header:].T)   # width × files
            block[:, ~valid[lo:lo + step]] = 0xFF
            for b in range(8):
                self.map[b::8, lo // 8:(lo + block.shape[1] + 7) // 8] = np.packbits(
                    (block >> b) & 1, axis=1, bitorder="little")

    @staticmethod
    def of(blooms: Any) -> "BloomSlices | None":
        """The slices of ``blooms`` (an Arrow binary array of stored filters, one per file,
        null for none) when they are filters of one format and equal dimensions, else None."""
        header = B.HEADER
        matrix, valid = _filters(blooms)
        if matrix is None or matrix.shape[1] < header:
            return None
        heads = matrix[:, :header - 8][valid]
        return BloomSlices(matrix, valid) if (heads == heads[0]).all() else None

    def stored(self, files: Any) -> list:
        """The stored bytes of the filters of ``files`` (numpy; None where a file has none),
        as they were before slicing."""
        import numpy as np

        if not len(files):
            return []
        bits = (self.map[:, files >> 3] >> (files & 7).astype(np.uint8)) & 1
        packed = np.packbits(bits.T, axis=1, bitorder="little")[:, :self.width]
        counts = self.counts[files]
        return [self.header + counts[j:j + 1].tobytes() + packed[j].tobytes()
                if self.valid[f] else None for j, f in enumerate(files.tolist())]

    def holding(self, values: tuple, type_: str) -> Any:
        """A numpy mask of the files whose filter (of values of ``type_``) may hold one of
        ``values``."""
        import numpy as np

        out = np.zeros(self.map.shape[1], dtype=np.uint8)
        for value in values:
            found = B.positions(self.header, value, type_)
            if found is None:
                return np.ones(self.count, dtype=bool)
            acc = np.full(self.map.shape[1], 0xFF if found else 0, dtype=np.uint8)
            for p in found:
                acc &= self.map[p]
            out |= acc
        out |= self.missing          # files without a filter are never ruled out
        return np.unpackbits(out, bitorder="little")[:self.count].astype(bool)


def bloom_excludes(table: Any, key: str, files: Any, values: tuple) -> Any:
    """A numpy mask over ``files`` (file numbers of ``table``, ascending) of those whose Bloom
    filter of the sketch ``key`` holds none of ``values`` (normalized values of its type; False
    where a file has none)."""
    type_ = table.specs[table.spec_index(key)].type
    slices = table.bloom_slices(key)
    if slices is not None:
        return ~slices.holding(values, type_)[files]
    return _without_values(*table.blooms(key, files), values, type_)


def _bloom_passing(table: Any, test: Test, found: Any) -> Any:
    """``found`` (a numpy mask of files) without the files whose Bloom filter of the test's
    expression holds none of its literals."""
    import numpy as np

    if test.op not in ("=", "in") or not test.points or len(test.points) > BLOOM_POINTS \
            or not table.has_blooms(test.key, test.type):
        return found
    slices = table.bloom_slices(test.key)
    if slices is not None:
        return found & slices.holding(test.points, test.type)
    files = np.flatnonzero(found)
    if len(files):
        found = found.copy()
        found[files[bloom_excludes(table, test.key, files, test.points)]] = False
    return found


def candidates(condition: Node, table: Any) -> Any:
    """A numpy mask of the files of ``table`` (a :class:`indexes.skipping.table.StatsTable`)
    the first pass leaves to the evaluator (it would rule the others out too), or None when it
    checks no conjunct of ``condition``."""
    found = None
    checked = tests(condition)
    for test in checked:
        passing = table.bounds(test.key, test.type).passing(test)
        found = passing if found is None else found & passing
    for test in checked:
        found = _bloom_passing(table, test, found)
    return found
