"""Join rule for covering indexes: an equi-join whose two sides are each a Filter/Project chain
over a file relation reads both sides from covering indexes bucketed on the join keys, so Spark
joins matching buckets without shuffling either side.

Pure Python over :mod:`indexes.plan` trees. A join qualifies when its condition is a conjunction
of ``left column = right column`` (columns or nested fields, also through the aliases Spark puts
in a side's Project), no hint asks for a broadcast, and each side has a covering index whose
indexed columns are that side's join keys, paired in the same order with the other side's, with
bucket counts of which one divides the other (equal counts, or the powers of two new indexes get
by default; see :func:`pairable`), covering every column the side needs. Attributes are matched
by exprId.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from indexes.covering.build import delta_dirs
from indexes.covering.config import KIND as COVERING
from indexes.covering.match import Applicable, coverage, index_columns, normalize
from indexes.description import SourceDescription
from indexes.kind import HybridScan
from indexes.plan import Expr, PlanNode, attribute_use, conjuncts, output_attributes
from indexes.source import NotApplicable


@dataclass(frozen=True)
class JoinSide:
    """One side of a qualifying join: its file relation and its join keys (source column
    paths, case-normalized, in the condition's order)."""

    relation: PlanNode
    keys: tuple[tuple[str, ...], ...]


def side_relation(top: PlanNode) -> PlanNode | None:
    """The file relation under a chain of Project and Filter nodes starting at ``top``."""
    node = top
    while node.cls in ("Project", "Filter"):
        node = node.children[0]
    return node if node.cls == "LogicalRelation" else None


def source_column(use: tuple[int, tuple[str, ...]], top: PlanNode,
                  case_sensitive: bool) -> tuple[str, ...] | None:
    """The source column (name and struct fields) that attribute use ``use`` of ``top``'s output
    stands for, following Project aliases down to the relation; None for anything computed."""
    expr_id, path = use
    node = top
    while node.cls in ("Project", "Filter"):
        if node.cls == "Project":
            item = next((e for e in node.exprs.get("projectList", []) if e.expr_id == expr_id), None)
            if item is None:
                return None
            if item.cls == "Alias":
                inner = attribute_use(item.children[0])
                if inner is None:
                    return None
                expr_id, path = inner[0], inner[1] + path
        node = node.children[0]
    names = {a.expr_id: a.fields["name"] for a in output_attributes(node)}
    if expr_id not in names:
        return None
    return normalize((names[expr_id], *path), case_sensitive)


def join_sides(join: PlanNode, case_sensitive: bool) -> tuple[JoinSide, JoinSide] | str:
    """The two sides of an equi-join the rule can serve, or why it cannot."""
    conditions = join.exprs.get("condition")
    if not conditions:
        return "the join has no condition"
    tops = join.children
    relations = [side_relation(t) for t in tops]
    if None in relations:
        return "a side of the join is not a chain of Filter and Project over a file relation"
    ids = [{a.expr_id for a in _output_ids(t)} for t in tops]
    pairs: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    for conjunct in conjuncts(conditions[0]):
        if conjunct.cls != "EqualTo":
            return f"the join condition holds {conjunct.cls}, not only equalities (a = b AND ...)"
        a, b = (attribute_use(c) for c in conjunct.children)
        if a is None or b is None:
            return "the join condition compares something other than two columns"
        if a[0] in ids[1] and b[0] in ids[0]:
            a, b = b, a
        if not (a[0] in ids[0] and b[0] in ids[1]):
            return "an equality of the join condition does not compare a left and a right column"
        left = source_column(a, tops[0], case_sensitive)
        right = source_column(b, tops[1], case_sensitive)
        if left is None or right is None:
            return "a join key is computed, not a source column"
        if (left, right) not in pairs:
            pairs.append((left, right))
    lefts, rights = [p[0] for p in pairs], [p[1] for p in pairs]
    if len(set(lefts)) != len(lefts) or len(set(rights)) != len(rights):
        return "a join key is compared with more than one column of the other side"
    return JoinSide(relations[0], tuple(lefts)), JoinSide(relations[1], tuple(rights))


def _output_ids(top: PlanNode) -> list[Expr]:
    """The attributes a side's top node outputs (its Project list, else its child's)."""
    node = top
    while node.cls == "Filter":
        node = node.children[0]
    if node.cls == "Project":
        return node.exprs.get("projectList", [])
    return output_attributes(node)


def _indexed_keys(entry: Any, case_sensitive: bool) -> tuple[tuple[str, ...], ...]:
    indexed, _ = index_columns(entry.config)
    return tuple(normalize(c.path, case_sensitive) for c in indexed)


@dataclass(frozen=True)
class JoinApplicable:
    """Both sides of a join answered from covering indexes bucketed on the join keys."""

    left: Applicable
    right: Applicable


def evaluate(root: PlanNode, sides: tuple[JoinSide, JoinSide],
             candidates: tuple[list[Any], list[Any]],
             sources: tuple[SourceDescription, SourceDescription],
             case_sensitive: bool, hybrid: HybridScan | None = None) -> JoinApplicable | str:
    """Picks the pair of covering indexes (one per side, from ``candidates``) that serves the
    join, the smallest in total (then the most buckets); or says why none does. ``sources``
    describe each side's files; with ``hybrid``, an index over a changed source serves too
    (appended files are read and hashed into the index's buckets, deleted files' rows filtered
    out)."""
    left, right = sides
    pairing = dict(zip(left.keys, right.keys))
    usable: list[list[tuple[Any, Applicable]]] = [[], []]
    reasons: list[str] = []
    for i, (side, entries, source) in enumerate(zip(sides, candidates, sources)):
        for entry in entries:
            keys = _indexed_keys(entry, case_sensitive)
            if set(keys) != set(side.keys) or len(keys) != len(side.keys):
                reasons.append(f"'{entry.name}' is indexed on {_shown(keys)}, the "
                               f"{('left', 'right')[i]} join keys are {_shown(side.keys)}")
                continue
            found = coverage(root, side.relation, source, entry, case_sensitive, hybrid)
            if isinstance(found, NotApplicable):
                reasons.append(f"'{entry.name}': {found.reason}")
                continue
            usable[i].append((keys, found))
    pairs = [(lf, rt) for lk, lf in usable[0] for rk, rt in usable[1]
             if pairable(lf, rt) and all(pairing.get(a) == b for a, b in zip(lk, rk))]
    if pairs:
        # the smallest pair; of equal sizes, the one read in the most partitions
        lf, rt = min(pairs, key=lambda p: (p[0].size + p[1].size,
                                           -min(int(a.index.config["numBuckets"]) for a in p)))
        return JoinApplicable(replace(lf, rule="join"), replace(rt, rule="join"))
    if usable[0] and usable[1]:
        return ("the two sides' indexes have bucket counts of which neither divides the other "
                "(or differ in bucket count while hybrid scan or delta files add rows to their "
                "buckets), or pair their indexed columns in another order than the join condition")
    return "; ".join(reasons) or "a side of the join has no covering index over its source"


def pairable(left: Applicable, right: Applicable) -> bool:
    """Whether a join can read two indexes' buckets side by side: with equal bucket counts, or
    when one count divides the other and neither side adds rows to its buckets (appended files
    of hybrid scan, delta files), which are then read in the smaller count's groups (see
    :func:`join_partitions`)."""
    counts = sorted(int(a.index.config["numBuckets"]) for a in (left, right))
    if counts[0] == counts[1]:
        return True
    return counts[1] % counts[0] == 0 and not any(_adds_rows(a) for a in (left, right))


def _adds_rows(found: Applicable) -> bool:
    return bool(found.appended or delta_dirs(found.index.content))


#: A join over index buckets aims at this many tasks per core of the cluster...
TASKS_PER_CORE = 4
#: ...and at most this many index bytes (both sides) per task.
BYTES_PER_TASK = 64 << 20


def bucket_groups(num_buckets: int, cores: int, index_bytes: int) -> int:
    """In how many partitions a join reads two indexes of ``num_buckets`` buckets each.

    A bucket is one sorted file, so a join over the buckets as they are needs no sort; but
    each bucket is a task, and far more buckets than the cluster runs at once cost more in
    tasks than they save (200 buckets on 2 cores: slower than Spark's own shuffle). Then the
    buckets are read in fewer groups, bucket ``b`` in group ``b mod n`` for a divisor ``n`` of
    ``num_buckets`` (so group ``i`` holds the rows a hash partitioning into ``n`` partitions
    puts in partition ``i``), and each group is sorted: ``n`` is the smallest divisor that
    still gives each core TASKS_PER_CORE tasks and each task at most BYTES_PER_TASK. The
    buckets stay as they are when there are no more than 4 times that many.
    """
    wanted = max(TASKS_PER_CORE * cores, -(-index_bytes // BYTES_PER_TASK), 1)
    if num_buckets <= 4 * wanted:
        return num_buckets
    return min(n for n in range(wanted, num_buckets + 1) if num_buckets % n == 0)


def join_partitions(found: JoinApplicable, cores: int) -> int:
    """The partitions a join reads its two indexes' buckets in: as many as buckets while a
    bucket union adds appended or delta rows to them (hashed into every bucket; the counts are
    then equal), else :func:`bucket_groups` of the smaller bucket count and both indexes'
    size: a divisor of both counts, so each side reads bucket ``b`` in group ``b mod n``."""
    sides = (found.left, found.right)
    num_buckets = min(int(a.index.config["numBuckets"]) for a in sides)
    if any(_adds_rows(a) for a in sides):
        return num_buckets
    return bucket_groups(num_buckets, cores,
                         sum(int(a.index.content.get("sizeInBytes", 0)) for a in sides))


def join_obstacle(hint: str, chosen: tuple[Any, Any], candidates: tuple[list[Any], list[Any]],
                  bucketing: bool, broadcast_threshold: int) -> str | None:
    """Why the join rule leaves a join alone before looking at indexes, if it does: bucketing
    is off, a hint asks for a broadcast, a side is small enough for Spark to broadcast (its
    files as its indexes recorded them), or the filter rule already looks a side up by the
    first column of its index (``chosen``: each side's filter-rule verdict, or None)."""
    if not bucketing:
        return "spark.sql.sources.bucketing.enabled is false"
    if "broadcast" in hint.lower():
        return "a hint asks for a broadcast join"
    for side, entries in zip(chosen, candidates):
        size = min(sum(f.size for f in e.source.files or ()) for e in entries)
        if 0 <= size <= broadcast_threshold:
            return (f"a side is {size} bytes, within spark.sql.autoBroadcastJoinThreshold "
                    f"({broadcast_threshold}): Spark broadcasts it")
        if isinstance(side, Applicable) and side.point_lookup:
            return (f"the filter compares the first indexed column of '{side.index.name}' "
                    "with literals: the filter rule looks the rows up in it, cheaper than "
                    "joining every bucket")
    return None


def _shown(keys: tuple[tuple[str, ...], ...]) -> str:
    return ", ".join(".".join(k) for k in keys)


def with_join_reason(result: Any, reason: str) -> Any:
    """A covering index's verdict on a join side, completed with why the join rule did not
    apply (a filter-rule Applicable keeps applying)."""
    if isinstance(result, Applicable) and result.rule == "filter":
        return replace(result, note=f"join rule not applied: {reason}")
    if not isinstance(result, NotApplicable) or result.index.kind != COVERING:
        return result
    return NotApplicable(result.index, result.code, f"{result.reason}; join rule: {reason}")
