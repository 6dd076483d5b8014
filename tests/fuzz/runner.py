"""The fuzz loop: rounds of random datasets and index sets, each answering random queries that
are compared with vanilla Spark; between batches of queries a round sometimes applies a change
step to its sources and indexes (see :mod:`tests.fuzz.changes`; drawn from an RNG of its own,
so a round that draws no change runs as it would without them); a failure is minimized and
reported with its seeds and the change steps before it."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace

from tests.fuzz import case, changes, data, indexes, minimize, tables
from tests.fuzz.queries import JOIN_KEYS, Query, random_query

CHANGE_RATE = 0.2   # the chance of a change step before each batch of queries but the first


@dataclass
class Failure:
    """A query whose answer differed (or a change step that raised): the round's seed, the
    query's number in the round (the next one's for a change step), what differed, the number
    of change steps applied before and the minimized reproduction (Python code, those steps
    included)."""

    seed: int
    query: int
    failure: str
    reproduction: str = ""
    changes: int = 0


@dataclass
class Summary:
    """What a run did."""

    seed: int
    rounds: int = 0
    queries: int = 0
    used: int = 0
    skipped: int = 0
    text_rounds: int = 0   # rounds with a JSON or CSV source (also gzip-compressed)
    access_rounds: int = 0   # rounds with a source read as a table or by a glob pattern
    delta_rounds: int = 0    # rounds with a Delta table (only when a run asks for them)
    iceberg_rounds: int = 0  # rounds with an Iceberg table (only when a run asks for them)
    changes: int = 0       # change steps applied
    operations: dict = field(default_factory=dict)   # index operations' statuses, counted
    passed_over: int = 0   # seeds whose rounds lacked the formats asked for
    build_seconds: float = 0.0
    change_seconds: float = 0.0   # spent applying change steps
    seconds: float = 0.0
    failures: list = field(default_factory=list)

    def as_dict(self) -> dict:
        """The summary as JSON-ready data."""
        return {"seed": self.seed, "rounds": self.rounds, "queries": self.queries,
                "queriesUsingIndexes": self.used, "skippedBothRaised": self.skipped,
                "roundsWithJsonOrCsv": self.text_rounds,
                "roundsWithTableOrGlob": self.access_rounds, "roundsWithDelta": self.delta_rounds,
                "roundsWithIceberg": self.iceberg_rounds,
                "seedsPassedOver": self.passed_over,
                "changeSteps": self.changes, "operationStatuses": self.operations,
                "seconds": round(self.seconds, 1),
                "buildSeconds": round(self.build_seconds, 1),
                "changeSeconds": round(self.change_seconds, 1),
                "failures": [vars(f) for f in self.failures]}


def round_setup(seed: int, table_formats: tuple[str, ...] = ()) -> case.Setup:
    """The datasets and index sets of the round with ``seed``; with ``table_formats`` (names
    of :data:`tests.fuzz.tables.FORMATS`), some datasets are tables of one of them, drawn
    apart from the other draws (see :mod:`tests.fuzz.tables`: without, the round is what it
    was before; with several, the round's format is drawn apart too, and the round is what it
    is with that format alone); a cache only where :func:`tests.fuzz.tables.cacheable`."""
    rng = random.Random(seed)
    datasets = {"t": data.generate(rng, "t"), "u": data.generate(rng, "u", start_id=100_000)}
    access = random.Random(f"{seed}:access")   # apart from the other draws (added later)
    datasets = {name: replace(d, access=data.draw_access(access)) for name, d in datasets.items()}
    if table_formats:
        fmt = (random.Random(f"{seed}:table_format").choice(sorted(table_formats))
               if len(table_formats) > 1 else table_formats[0])
        datasets = tables.draw(random.Random(f"{seed}:{fmt}"), datasets, fmt)
    join = rng.random() < 0.7
    keys = JOIN_KEYS if join else None
    specs = [spec for name, dataset in datasets.items()
             for spec in indexes.random_set(rng, name, dataset.columns, keys)]
    specs = [s for s in specs
             if not (s.kind == "cache" and not tables.cacheable(datasets[s.dataset]))]
    return case.Setup(datasets, specs)


def round_query(setup: case.Setup, seed: int, number: int) -> Query:
    """Query ``number`` of the round with ``seed`` (over the datasets as its change steps so
    far left them)."""
    rng = random.Random(seed * 1_000_003 + number)
    datasets = changes.current(setup.datasets, setup.steps)
    return random_query(rng, datasets["t"], datasets["u"],
                        indexes.focus(setup.specs, "t"), indexes.focus(setup.specs, "u"),
                        indexes.covered(setup.specs, "t"))


def change_rng(seed: int) -> random.Random:
    """The RNG of the change steps of the round with ``seed`` (apart from its other draws)."""
    return random.Random(f"{seed}:changes")


def run(spark, seed: int, seconds: float, queries_per_round: int = 60, batch: int = 12,
        max_queries: int | None = None, minimize_seconds: float = 120.0, log=print,
        formats: tuple[str, ...] = (), change_rate: float = CHANGE_RATE,
        table_formats: tuple[str, ...] = ()) -> Summary:
    """Runs rounds with seeds ``seed``, ``seed + 1``, ... for about ``seconds`` (or until
    ``max_queries``), ``batch`` queries per Spark job (a tagged union); before each batch but
    a round's first, applies a random change step with probability ``change_rate``; returns
    what happened. With ``formats``, passes over the seeds whose rounds have no dataset in one
    of them (the seeds run reproduce as they are). With ``table_formats`` (e.g. ``("delta",
    "iceberg")``), rounds draw tables of those formats too (see :func:`round_setup`). Leaves the accelerator disabled."""
    summary = Summary(seed)
    start = time.monotonic()
    round_seed = seed

    def more() -> bool:
        return time.monotonic() - start < seconds and (
            max_queries is None or summary.queries < max_queries)

    while more():
        planned = round_setup(round_seed, table_formats)
        present = {d.format for d in planned.datasets.values()}
        if formats and not present & set(formats):
            summary.passed_over += 1
            round_seed += 1
            continue
        summary.text_rounds += any(f not in ("parquet", *data.TABLE_FORMATS) for f in present)
        summary.delta_rounds += data.DELTA in present
        summary.iceberg_rounds += data.ICEBERG in present
        read_as = {f"{n} as {d.access}" for n, d in planned.datasets.items() if d.access != "path"}
        summary.access_rounds += bool(read_as)
        built = time.monotonic()
        setup = case.build(spark, planned)
        summary.build_seconds += time.monotonic() - built
        rng = change_rng(round_seed)
        try:
            number = 0
            while number < queries_per_round and more():
                if number and rng.random() < change_rate and not _change(
                        spark, setup, rng, summary, round_seed, number, log):
                    break
                numbers = range(number, min(number + batch, queries_per_round))
                number = numbers[-1] + 1
                queries = [round_query(setup, round_seed, n) for n in numbers]
                for n, query, outcome in zip(numbers, queries,
                                             case.run_batch(spark, setup, queries)):
                    summary.queries += 1
                    summary.used += outcome.used
                    summary.skipped += outcome.skipped
                    if outcome.failure:
                        summary.failures.append(
                            _report(spark, setup, round_seed, n, query, outcome, minimize_seconds, log))
        finally:
            case.teardown(setup)
        summary.rounds += 1
        log(f"round {round_seed} ({', '.join(sorted(present | read_as))}): {summary.queries} queries so "
            f"far, {summary.used} used an index or the cache, {len(summary.failures)} failures, "
            f"{time.monotonic() - start:.0f} s")
        round_seed += 1
    summary.seconds = time.monotonic() - start
    return summary


def _change(spark, setup: case.Setup, rng: random.Random, summary: Summary, seed: int,
            number: int, log) -> bool:
    """Applies a random change step to ``setup``, counted in ``summary``; False when it
    raised (recorded as a failure: the round cannot go on)."""
    step = changes.random_step(rng, setup.datasets, setup.specs, setup.steps)
    before = list(setup.steps)
    log(f"  change step {len(before) + 1} before query {number}: {step.describe()}")
    started = time.monotonic()
    try:
        statuses = case.apply(spark, setup, step)
    except Exception as e:   # noqa: BLE001 (an unexpected error of an operation: a finding)
        failure = f"change step raised {type(e).__name__}: {str(e)[:500]}"
        log(f"FAILURE seed={seed} before query {number}: {failure}")
        summary.failures.append(Failure(
            seed, number, failure,
            minimize.snippet(setup.datasets, setup.specs, None, before + [step]),
            changes=len(before)))
        return False
    finally:
        summary.change_seconds += time.monotonic() - started
    if statuses:
        log(f"    statuses: {', '.join(statuses)}")
    summary.changes += 1
    for status in statuses:
        summary.operations[status] = summary.operations.get(status, 0) + 1
    return True


def _table_formats(setup: case.Setup) -> tuple[str, ...]:
    return tuple(sorted({d.format for d in setup.datasets.values()} & set(data.TABLE_FORMATS)))


def _report(spark, setup, seed: int, number: int, query: Query, outcome, seconds: float,
            log) -> Failure:
    log(f"FAILURE seed={seed} query={number}: {outcome.failure}")
    alone = case.run(spark, setup, query)
    formats = _table_formats(setup)
    if not alone.failure:
        log("  (the query alone gives vanilla's answer: it differs only inside its batch)")
        return Failure(seed, number, outcome.failure + " (only inside a batch of queries)",
                       f"# the round's setup: tests.fuzz.runner.round_setup({seed}"
                       f"{f', table_formats={formats!r}' if formats else ''}); "
                       f"its queries {number} and neighbours, batched, after its change "
                       "steps; the query alone after them:\n"
                       + minimize.snippet(setup.datasets, setup.specs, query, setup.steps),
                       changes=len(setup.steps))
    repro = minimize.minimize(spark, setup, query, seconds, log)
    log(repro)
    return Failure(seed, number, alone.failure, repro, changes=len(setup.steps))
