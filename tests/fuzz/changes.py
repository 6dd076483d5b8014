"""Changes between query batches: a round's sources and indexes change the way users change
them while querying. A change step alters one dataset's files (appends new files, into an
existing or a new partition of a partitioned dataset; deletes a file; or overwrites one under
the same name with other rows: the accelerator tells files apart by path, size and
modification time) and then, or instead, runs index operations of the public API on that
dataset's indexes: ``refreshIndex`` in a random mode (full, incremental, quick),
``optimizeIndex`` of a covering index, ``hs.cache`` or ``hs.uncache`` for the cache, and the
lifecycle: ``deleteIndex`` (no longer used), then ``restoreIndex`` or ``vacuumIndex`` (gone
for good; no operation follows), and ``vacuumIndex`` of an active index (its replaced data
versions, retention 0); or leaves them stale (hybrid scan, statistics of unknown files,
stale-index fallback). Every operation is Python code (:func:`operation_code`) run as it is by
the fuzzer and in reproductions. A refusal documented as ``InvalidIndexConfigError`` (an
incremental or quick refresh of a covering index without lineage after deletions) is the
operation's expected status ``refused``, and so is the documented refusal of an index build
over an Iceberg table whose files carry delete files (``UnsupportedSourceError``). A Delta or
Iceberg dataset's source changes go through its format (:data:`tests.fuzz.tables.SOURCE_CHANGES`:
rows appended, deleted, updated or merged by SQL, a compaction), and only an Iceberg table
without delete files has a cache (:func:`tests.fuzz.tables.cacheable`)."""
from __future__ import annotations

import random
import sys
from dataclasses import dataclass, replace

from tests.fuzz import data, tables
from tests.fuzz.indexes import IndexSpec

# source changes with their weights ("": the files stay, only index operations run)
SOURCE_CHANGES = {"append": 4, "delete": 2, "overwrite": 2, "": 2}
REFRESH_MODES = ("full", "incremental", "quick")
OPTIMIZE_MODES = ("quick", "full")
STALE = 0.35         # share of source changes after which no index operation runs
NEW_PARTITION = 3    # appended files go to p=0..2 (existing) or p=3 (a new partition)
LIFECYCLE = 0.15     # share of an active index's operations that delete or vacuum it
UNCACHE = 0.3        # share of the cache's operations that uncache
# The function running one operation (defined in reproductions too): its status is the
# summary's (succeeded or noop), ``done`` for hs.cache and hs.uncache ("cached", "uncached"),
# "refused" for the documented refusal.
OPERATE_CODE = """def operate(action, done='cached'):
    try:
        row = action().collect()[0].asDict()
    except InvalidIndexConfigError as e:   # documented refusal, e.g. incremental without lineage
        print('refused:', str(e)[:300])
        return 'refused'
    except UnsupportedSourceError as e:   # documented: no index over an Iceberg table's
        if 'carry delete files' not in str(e):   # files that carry delete files
            raise
        print('refused:', str(e)[:300])
        return 'refused'
    return row.get('status', done)
"""


@dataclass(frozen=True)
class Step:
    """A change of ``dataset``: its ``source`` change (``append``, ``delete``, ``overwrite`` or
    "" for none) of file number ``file`` (files are numbered as written: the dataset's files,
    its appended ones, then those of earlier steps) with ``rows`` (one list per appended file,
    or the overwriting file's rows) into ``partitions`` (appended files of a partitioned
    dataset); of a Delta or Iceberg dataset also ``delete_rows``, ``update`` (the rows of ``ids``, their
    ``k`` and ``s`` set to ``assign``), ``merge`` (``rows``, one list, upserted by id, new
    ones into ``partitions``) or ``optimize`` (its compaction); then its ``operations``: ``(operation, index name, mode)`` with operation
    ``refresh``, ``optimize``, ``delete``, ``restore``, ``vacuum``, ``cache`` or ``uncache``."""

    dataset: str
    source: str = ""
    file: int = -1
    rows: tuple = ()
    partitions: tuple = ()
    operations: tuple = ()
    ids: tuple = ()
    assign: tuple = ()

    def describe(self) -> str:
        """A one-line summary (without the rows)."""
        what = {"append": f"append {len(self.rows)} files "
                          f"({sum(len(r) for r in self.rows)} rows)"
                          + (f" into p={list(self.partitions)}" if self.partitions else ""),
                "delete": f"delete file {self.file}",
                "overwrite": f"overwrite file {self.file} "
                             f"({len(self.rows[0]) if self.rows else 0} rows)",
                "delete_rows": f"DELETE {len(self.ids)} rows",
                "update": f"UPDATE {len(self.ids)} rows SET k, s = {self.assign!r}",
                "merge": f"MERGE {sum(len(r) for r in self.rows)} rows",
                "optimize": "OPTIMIZE",
                "": "files unchanged"}[self.source]
        ops = ", ".join(" ".join(x for x in op if x) for op in self.operations) or "indexes stale"
        return f"{self.dataset}: {what}; {ops}"


def live_files(dataset: data.Dataset, steps: list[Step]) -> tuple[dict, int]:
    """The rows of each file of ``dataset`` after ``steps`` (by file number, present files
    only) and the number its next file gets."""
    numbered = list(enumerate(dataset.files + dataset.appended))
    files = {i: rows for i, rows in numbered if rows and i not in dataset.deleted}
    following = len(numbered)
    for step in steps:
        if step.dataset != dataset.name:
            continue
        if step.source == "append":
            for rows in step.rows:
                files[following] = rows
                following += 1
        elif step.source == "delete":
            del files[step.file]
        elif step.source == "overwrite":
            files[step.file] = step.rows[0]
        elif step.source:
            following = tables.model(files, following, step)
    return files, following


def current(datasets: dict, steps: list[Step]) -> dict:
    """The datasets as queries see them after ``steps`` (unchanged objects without steps)."""
    changed = {s.dataset for s in steps}
    return {name: replace(d, files=list(live_files(d, steps)[0].values()), appended=[],
                          deleted=()) if name in changed else d
            for name, d in datasets.items()}


def index_state(name: str, steps: list[Step]) -> str:
    """Index ``name`` after ``steps``: ``active``, ``deleted`` or ``gone`` (vacuumed after its
    deletion)."""
    state = "active"
    for step in steps:
        for operation, index, _ in step.operations:
            if index == name:
                state = {"delete": "deleted", "restore": "active",
                         "vacuum": "gone" if state == "deleted" else state}.get(operation, state)
    return state


def _next_id(dataset: data.Dataset, steps: list[Step]) -> int:
    rows = [r for f in dataset.files + dataset.appended for r in f]
    rows += [r for s in steps if s.dataset == dataset.name for f in s.rows for r in f]
    return max((r[0] for r in rows), default=0) + 1


def random_step(rng: random.Random, datasets: dict, specs: list[IndexSpec],
                steps: list[Step]) -> Step:
    """A random change of one of ``datasets`` after ``steps`` (only deleting a file of a
    dataset that keeps one; files unchanged only where an index is left), then random
    operations on its indexes among ``specs`` that are not gone."""
    dataset = datasets[rng.choice(sorted(datasets))]
    live, _ = live_files(dataset, steps)
    own = {s: index_state(s.name, steps) for s in specs if s.dataset == dataset.name}
    own = {s: state for s, state in own.items() if state != "gone"}
    first_id = _next_id(dataset, steps)
    if dataset.format in data.TABLE_FORMATS:   # its changes through its format
        own = {s: state for s, state in own.items()
               if s.kind != "cache" or tables.cacheable(dataset)}
        step = tables.random_source(rng, dataset, live, first_id, Step(dataset.name),
                                    NEW_PARTITION)
        source = step.source if step.source or own else "append"
    else:
        source = rng.choices(list(SOURCE_CHANGES), list(SOURCE_CHANGES.values()))[0]
        if (source == "delete" and len(live) < 2) or not (source or own):
            source = "append"
        step = Step(dataset.name, source)
    if source == "append":
        step = replace(step, source=source)
        counts = [rng.randint(1, 30) for _ in range(rng.choice([1, 1, 2]))]
        rows = tuple(data.draw_rows(rng, dataset.format, first_id + sum(counts[:i]), c)
                     for i, c in enumerate(counts))
        partitions = (tuple(rng.randint(0, NEW_PARTITION) for _ in counts)
                      if dataset.partitioned else ())
        step = replace(step, rows=rows, partitions=partitions)
    elif source in ("delete", "overwrite"):
        file = rng.choice(sorted(live))
        step = replace(step, file=file)
        if source == "overwrite":
            old = live[file]
            kept = [old[i] for i in sorted(rng.sample(range(len(old)), rng.randint(0, len(old))))]
            step = replace(step, rows=(kept + data.draw_rows(rng, dataset.format, first_id,
                                                             rng.randint(1, 10)),))
    return replace(step, operations=_operations(rng, own, required=not source))


def _operations(rng: random.Random, specs: dict, required: bool) -> tuple:
    """Operations on some of ``specs`` (each with its state; none at all with probability
    :data:`STALE` unless ``required``)."""
    if not specs or (not required and rng.random() < STALE):
        return ()
    chosen = [spec for spec in specs if rng.random() < 0.5] or [rng.choice(list(specs))]
    return tuple(_operation(rng, spec, specs[spec]) for spec in chosen)


def _operation(rng: random.Random, spec: IndexSpec, state: str) -> tuple:
    if spec.kind == "cache":
        return ("uncache" if rng.random() < UNCACHE else "cache", spec.name, "")
    if state == "deleted":
        return (rng.choice(("restore", "vacuum")), spec.name, "")
    draw = rng.random()
    if draw < LIFECYCLE:
        return ("delete" if draw < LIFECYCLE / 2 else "vacuum", spec.name, "")
    if spec.kind == "covering" and rng.random() < 0.3:
        return ("optimize", spec.name, rng.choice(OPTIMIZE_MODES))
    return ("refresh", spec.name, rng.choice(REFRESH_MODES))


def operation_code(operation: tuple, specs: list[IndexSpec], datasets: dict) -> str:
    """A Python expression (over ``spark``, ``hs``, ``root``, ``operate`` and
    :data:`tests.fuzz.data.NAMES`) running ``operation``; its value is the status."""
    kind, name, mode = operation
    if kind == "refresh":
        return f"operate(lambda: hs.refreshIndex({name!r}, {mode!r}))"
    if kind == "optimize":
        return f"operate(lambda: hs.optimizeIndex({name!r}, {mode!r}))"
    if kind in ("delete", "restore"):
        return f"operate(lambda: hs.{kind}Index({name!r}))"
    if kind == "vacuum":
        return f"operate(lambda: hs.vacuumIndex({name!r}, 0))"
    spec = next(s for s in specs if s.name == name)
    source = data.source_code(datasets[spec.dataset], "root")
    if kind == "uncache":
        return f"operate(lambda: hs.uncache({source}), 'uncached')"
    return f"operate(lambda: {spec.code(source)})"


def run_operation(spark, hs, root: str, code: str) -> str:
    """Runs the operation ``code`` (see :func:`operation_code`) over the case under ``root``;
    its status (what it prints goes to stderr: the fuzzer's summary is on stdout)."""
    from accelerator import InvalidIndexConfigError, UnsupportedSourceError
    namespace = {"spark": spark, "hs": hs, "root": root,
                 "InvalidIndexConfigError": InvalidIndexConfigError,
                 "UnsupportedSourceError": UnsupportedSourceError, **data.NAMES,
                 "print": lambda *args: print(*args, file=sys.stderr)}
    exec(OPERATE_CODE, namespace)   # noqa: S102 (own code)
    return eval(code, namespace)    # noqa: S307 (own code)


# --- minimizing: smaller step lists --------------------------------------------------------


def smaller(steps: list[Step], datasets: dict):
    """Candidate step lists over ``datasets``, each one change smaller: a step dropped (last
    first), an operation dropped, a step's source change dropped (keeping its operations);
    later steps renumbered where the change dropped appended files (candidates whose later
    steps delete or overwrite those are left out)."""
    for i in reversed(range(len(steps))):
        candidate = _replaced(steps, i, None, datasets)
        if candidate is not None:
            yield candidate
    for i, step in enumerate(steps):
        for j in range(len(step.operations)):
            ops = step.operations[:j] + step.operations[j + 1:]
            if ops or step.source:
                yield steps[:i] + [replace(step, operations=ops)] + steps[i + 1:]
        if step.source and step.operations:
            candidate = _replaced(steps, i, Step(step.dataset, operations=step.operations),
                                  datasets)
            if candidate is not None:
                yield candidate


def _replaced(steps: list[Step], i: int, step: Step | None, datasets: dict) -> list[Step] | None:
    """``steps`` with step ``i`` replaced by ``step`` (None: dropped), which appends no files;
    None when a later step deletes or overwrites a file step ``i`` appended."""
    old = steps[i]
    later = steps[i + 1:]
    if old.source == "append":
        first = live_files(datasets[old.dataset], steps[:i])[1]
        later = _renumbered(later, old.dataset, set(range(first, first + len(old.rows))))
        if later is None:
            return None
    return steps[:i] + ([step] if step else []) + later


def _renumbered(steps: list[Step], name: str, removed: set) -> list[Step] | None:
    """``steps`` with the files of dataset ``name`` numbered as if the files numbered
    ``removed`` had never been written; None when a step deletes or overwrites one of them."""
    out = []
    for step in steps:
        if step.dataset == name and step.file >= 0:
            if step.file in removed:
                return None
            step = replace(step, file=step.file - sum(r < step.file for r in removed))
        out.append(step)
    return out


def without_index(steps: list[Step], name: str) -> list[Step]:
    """``steps`` without the operations on index ``name`` (and steps left with nothing)."""
    kept = [replace(s, operations=tuple(op for op in s.operations if op[1] != name))
            for s in steps]
    return [s for s in kept if s.source or s.operations]


def refit(steps: list[Step], dataset: data.Dataset, removed: set) -> list[Step] | None:
    """``steps`` over a smaller ``dataset`` whose files numbered ``removed`` were dropped
    (later files renumbered) and whose format or partitioning may differ (rows fitted to it);
    None when a step deletes or overwrites a dropped file."""
    renumbered = _renumbered(steps, dataset.name, removed)
    if renumbered is None:
        return None
    return [replace(s, rows=tuple(data.fit(list(s.rows), dataset.format)),
                    partitions=s.partitions if dataset.partitioned else ())
            if s.dataset == dataset.name else s for s in renumbered]
