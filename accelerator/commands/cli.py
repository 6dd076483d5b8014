"""The accelerator command: every index operation of the Python API over one system path
(create from a spec file, refresh, optimize, delete, restore, vacuum, cancel), listings (indexes,
index, events, history), plan analysis of SQL queries (explain, whynot), the rule engine (advise
[--apply], rules validate), the scheduler (config validate, serve, jobs, run-job), a demo on a
local sample and jar (the compiled JVM rule's jar). Without a command it prints this help.

Exit codes: 0 success; 1 a user error, whose message goes to stderr (an AcceleratorError, a bad
spec file, a system path that does not exist, SQL that Spark cannot analyse); 2 a usage error.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from importlib import metadata
from typing import Any, Callable

from accelerator.commands import demo as demo_command
from accelerator.commands import init as init_command
from accelerator.commands import scheduler as scheduler_commands
from accelerator.commands import system_path
from accelerator.commands.session import spark_session
from accelerator.commands.spec import read_spec
from accelerator.runtime.settings import Settings
from indexes import kinds
from indexes.errors import AcceleratorError
from indexes.kind import REFRESH_MODES

DISTRIBUTION = "spark-accelerator"
_SHOW_ALL = 1 << 30   # rows for DataFrame.show: all of them (Spark caps it itself)


class CliError(AcceleratorError):
    """A user error the command line finds itself: a missing system path."""


def _check_system_path(spark: Any) -> None:
    """CliError when the session's system path does not exist."""
    from indexes.fs import HadoopFs

    path = Settings.of_session(spark).system_path
    if not HadoopFs(spark).exists(path):
        raise CliError(_missing(path))


# --- commands over a system path ----------------------------------------------------------
def _mode(args: argparse.Namespace) -> dict:
    """The ``mode`` argument when given (else the API's default applies)."""
    return {} if args.mode is None else {"mode": args.mode}


def _shown(args: argparse.Namespace) -> Callable[[str], Any]:
    """Where explain and whyNot show their text: stdout, or nowhere with ``--json`` (their
    results are then printed as JSON)."""
    return (lambda text: None) if args.json else print


def _query(hs: Any, args: argparse.Namespace) -> Any:
    """The DataFrame of the command's SQL, with the accelerator enabled."""
    hs.enable(hs.spark)
    return hs.spark.sql(args.sql)


COMMANDS: dict[str, Callable[[Any, argparse.Namespace], Any]] = {
    "create": lambda hs, a: hs.createIndex(a.spec.source_frame(hs.spark), a.spec.config),
    "refresh": lambda hs, a: hs.refreshIndex(a.name, **_mode(a)),
    "optimize": lambda hs, a: hs.optimizeIndex(a.name, **_mode(a)),
    "delete": lambda hs, a: hs.deleteIndex(a.name),
    "restore": lambda hs, a: hs.restoreIndex(a.name),
    "vacuum": lambda hs, a: hs.vacuumIndex(a.name, a.retention_seconds),
    "cancel": lambda hs, a: hs.cancel(a.name),
    "indexes": lambda hs, a: hs.indexes(),
    "index": lambda hs, a: hs.index(a.name),
    "events": lambda hs, a: hs.events(),
    "history": lambda hs, a: hs.history(),
    "explain": lambda hs, a: hs.explain(_query(hs, a), verbose=a.verbose,
                                        redirectFunc=_shown(a)),
    "whynot": lambda hs, a: hs.whyNot(_query(hs, a), indexName=a.index, redirectFunc=_shown(a)),
    "advise": lambda hs, a: _advise(hs, a),
}


def _advise(hs: Any, args: argparse.Namespace) -> Any:
    """The rule engine's recommendations (with ``--rules``: following that file), carried out
    with ``--apply``."""
    if args.rules:
        hs.loadRules(args.rules)
    return hs.applyRecommendations() if args.apply else hs.recommend()


def _emit(result: Any, as_json: bool, vertical: bool) -> None:
    """Prints what an API call returned: a DataFrame as a table (or one JSON object per row);
    explain's text and whyNot's reasons, which the API showed itself, only as JSON."""
    from pyspark.sql import DataFrame, functions as F

    if isinstance(result, DataFrame):
        if as_json:
            for row in result.select(F.to_json(F.struct("*"))).collect():
                print(row[0])
        else:
            result.show(_SHOW_ALL, truncate=False, vertical=vertical)
    elif as_json and isinstance(result, str):
        print(json.dumps({"explain": result}))
    elif as_json and isinstance(result, list):
        for reason in result:
            print(json.dumps(dataclasses.asdict(reason)))


#: the commands that name an index (checked, and on a local system path found, before Spark)
_NAMED = ("refresh", "optimize", "delete", "restore", "vacuum", "cancel", "index")


def check_inputs(args: argparse.Namespace) -> None:
    """Everything about a command's inputs that can be checked without Spark, before it
    starts: the spec file (read into ``args.spec``), index names, the vacuum retention, the
    rules file, the SQL text; an AcceleratorError or RulesError naming what is wrong."""
    from indexes.errors import InvalidIndexConfigError
    from indexes.names import validate_index_name

    if args.command == "create":
        args.spec = read_spec(args.spec)   # the file's path becomes what it says
    if args.command in _NAMED:
        validate_index_name(args.name)
    if getattr(args, "index", None) is not None:
        validate_index_name(args.index)
    if getattr(args, "retention_seconds", None) is not None and not args.retention_seconds >= 0:
        raise InvalidIndexConfigError(
            f"vacuum retention must be 0 seconds or more, got {args.retention_seconds:g}")
    if getattr(args, "rules", None):
        from rules.user_rules import load_rules_file
        load_rules_file(args.rules)
    if getattr(args, "sql", None) is not None and not args.sql.strip():
        raise CliError("the SQL query is empty")


def _local_checks(args: argparse.Namespace, system_path: str) -> None:
    """On a local system path, before Spark: CliError when it does not exist (but for
    ``create``, which makes it), IndexNotFoundError when the named index is not there,
    IndexExistsError when ``create``'s is."""
    from indexes.fs.local import LocalFs
    from indexes.lifecycle import IndexLifecycle

    fs = LocalFs()
    if args.command == "create":
        if fs.exists(system_path):
            IndexLifecycle(fs, system_path).free_name(args.spec.config.indexName)
        return
    if not fs.exists(system_path):
        raise CliError(_missing(system_path))
    for name in [getattr(args, "name", None) if args.command in _NAMED else None,
                 getattr(args, "index", None)]:
        if name is not None:
            IndexLifecycle(fs, system_path).get(name)


def _missing(path: str) -> str:
    return (f"system path {path} does not exist; give the right --system-path, or create an "
            "index there with `accelerator create`")


def run_command(args: argparse.Namespace) -> int:
    """Runs one command of :data:`COMMANDS` on the system path and prints its result. Its
    inputs are checked before Spark starts (:func:`check_inputs`); on a local system path the
    read-only commands start no JVM (:mod:`accelerator.commands.offline`) unless ``--spark``."""
    from accelerator.commands import offline

    check_inputs(args)
    where = system_path.resolve(args.system_path, system_path.config_file(args.config),
                                _active_session())
    if where.local:
        _local_checks(args, where.path)
        if args.command in offline.COMMANDS and not args.spark:
            return offline.run(args, where.path)
    from accelerator import Hyperspace

    with spark_session(args, f"accelerator-{args.command}", where.path) as spark:
        if args.command != "create":
            _check_system_path(spark)
        result = COMMANDS[args.command](Hyperspace(spark), args)
        _emit(result, args.json, vertical=args.command == "index")
    return 0


def _active_session() -> Any:
    """The active SparkSession of this process (a command run from Python), else None; starts
    nothing."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


# --- jar ------------------------------------------------------------------------------
def print_jar(args: argparse.Namespace) -> int:
    """Compiles the JVM rule if needed and prints its jar (for spark.jars with spark.sql.extensions)."""
    import pyspark

    from accelerator.runtime.jvm import build_jar
    print(build_jar(pyspark.__version__))
    return 0


# --- arguments ----------------------------------------------------------------------------
def _version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def parser() -> argparse.ArgumentParser:
    """The command line's argument parser."""
    top = argparse.ArgumentParser(prog="accelerator", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = top.add_subparsers(dest="command")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--system-path",
                        help=f"index system path (default: ${system_path.SYSTEM_PATH_VARIABLE}, "
                        "else the systemPath of the configuration file, else "
                        "spark.accelerator.system.path in spark-defaults.conf, else "
                        "<spark.sql.warehouse.dir>/indexes; see docs/cli.md)")
    common.add_argument("--config", help="the scheduler's configuration file whose systemPath "
                        f"is the default system path (default: ${system_path.CONFIG_VARIABLE}, "
                        f"else ./{system_path.CONFIG_FILE} when it exists)")
    common.add_argument("--spark", action="store_true", help="start Spark even where the "
                        "command needs none (a listing on a local system path): to judge the "
                        "health of indexes over catalog, Delta or Iceberg tables")
    common.add_argument("--master", default="local[2]",
                        help="Spark master, when no Spark session is active (default local[2])")
    common.add_argument("--json", action="store_true", help="print one JSON object per row")

    def command(name: str, help_: str, *arguments: tuple[str, dict]) -> None:
        p = sub.add_parser(name, parents=[common], help=help_, description=help_)
        for flag, options in arguments:
            p.add_argument(flag, **options)
        p.set_defaults(func=run_command)

    name = ("name", {"help": "index name"})
    sql = ("sql", {"help": "a SQL query, e.g. \"SELECT * FROM parquet.`/data/x` WHERE a = 1\""})
    command("create", "create an index from a JSON or YAML spec file (see docs/cli.md)",
            ("spec", {"help": "spec file (.json, else YAML)"}))
    command("refresh", "bring an index up to date with its source", name,
            ("--mode", {"choices": REFRESH_MODES, "help": "full (default): rebuild; "
                        "incremental: index only the changed files; quick: record them for "
                        "hybrid scan"}))
    command("optimize", "compact a covering index's data files", name,
            ("--mode", {"choices": kinds.optimize_modes(), "help": "quick (default): the "
                        "small files, level by level; full: every bucket into one file"}))
    command("delete", "soft-delete an index (restore brings it back)", name)
    command("restore", "restore a deleted index", name)
    command("vacuum", "remove a deleted index for good, or an active index's unused data versions",
            name, ("--retention-seconds", {"type": float, "help": "keep data versions replaced "
                   "less long ago (default spark.accelerator.index.vacuum.retentionSeconds)"}))
    command("cancel", "roll back an operation that did not finish", name)
    command("indexes", "list the indexes with their state, size and health against their "
            "sources now (warning: what changed since each was built and the refresh that fixes "
            "it)")
    command("index", "show one index with its details", name)
    command("events", "list the index operations")
    command("history", "list the recorded query history")
    command("explain", "the plan of a SQL query with indexes and without, and the indexes used",
            sql, ("--verbose", {"action": "store_true", "help": "show every candidate index"}))
    command("whynot", "why each index (or one) is or is not used by a SQL query", sql,
            ("--index", {"help": "only this index"}))
    command("advise", "what the rule engine recommends from the query history and the user "
            "rules (with --apply: do it)",
            ("--apply", {"action": "store_true", "help": "carry the recommendations out and "
                         "print what happened to each"}),
            ("--rules", {"help": "a user rules YAML file (default spark.accelerator.rules.path)"}))

    demo_command.add_parser(sub)
    init_command.add_parser(sub)
    jar_help = "print the path of the compiled JVM rule (compiling it if needed)"
    j = sub.add_parser("jar", help=jar_help, description=jar_help + ": put it in spark.jars "
                       "with spark.sql.extensions=accelerator.jvm.AcceleratorExtensions to "
                       "install the rule when sessions start (e.g. from spark-submit)")
    j.set_defaults(func=print_jar)
    r = sub.add_parser("rules", help="the rule engine's user rules",
                       description="the rule engine's user rules: validate a rules file")
    rules_sub = r.add_subparsers(dest="rules_command", required=True)
    v = rules_sub.add_parser("validate", help="print the rules of a YAML file as understood "
                             "(exit 0) or every error with its line and column (exit 1)")
    v.add_argument("file", help="the rules file (`accelerator init` writes a commented one)")
    v.set_defaults(func=validate_rules)
    c = sub.add_parser("config", help="the scheduler's configuration file",
                       description="the scheduler's configuration file: validate it")
    config_sub = c.add_subparsers(dest="config_command", required=True)
    cv = config_sub.add_parser("validate", help="print the jobs of a configuration file with "
                               "their next three run times (exit 0) or every error with its "
                               "line and column (exit 1)")
    cv.add_argument("file", help="the configuration file (`accelerator init` writes a "
                    "commented one)")
    cv.set_defaults(func=validate_config)
    scheduler_commands.add_parsers(sub)
    return top


def _loaded(load: Callable[[str], Any], path: str) -> Any:
    """What ``load(path)`` reads from a rules or jobs file, or None after printing each of its
    problems (file:line:column: message) to stderr."""
    from rules.user_rules import RulesError

    try:
        return load(path)
    except RulesError as exc:   # also the jobs file's ConfigError
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return None


def validate_rules(args: argparse.Namespace) -> int:
    """``accelerator rules validate FILE``: no Spark needed."""
    from rules.user_rules import load_rules_file

    found = _loaded(load_rules_file, args.file)
    if found is None:
        return 1
    budget = found.budget
    print(f"{args.file}: {len(found.rules)} rules; budget: indexBytes {budget.index_bytes}, "
          f"cacheBytes {budget.cache_bytes}, maxIndexesPerSource "
          f"{budget.max_indexes_per_source}, buildSecondsPerRun {budget.build_seconds_per_run} "
          "(None: the engine's default)")
    for rule in found.rules:
        print(rule.describe())
    return 0


def validate_config(args: argparse.Namespace) -> int:
    """``accelerator config validate FILE``: no Spark needed. Each job is printed with its next
    three run times, in its time zone."""
    from datetime import datetime, timezone

    from accelerator.scheduler.config import load_config_file

    found = _loaded(load_config_file, args.file)
    if found is None:
        return 1
    print(f"{args.file}: {len(found.jobs)} jobs on system path {found.system_path}; job store "
          f"{found.job_store}; {len(found.rules.rules)} rules")
    for rule in found.rules.rules:
        print(rule.describe())
    now = datetime.now(timezone.utc).replace(microsecond=0)
    for job in found.jobs:
        print(job.describe())
        print("    next runs: " + ", ".join(t.isoformat() for t in job.next_runs(3, now)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Runs the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit code.
    Without a command it prints the help and exits 0, starting nothing."""
    from pyspark.errors import AnalysisException

    from indexes.spark_logs import silence_query_context_logs
    from rules.user_rules import RulesError

    top = parser()
    args = top.parse_args(argv)
    if not getattr(args, "func", None):
        top.print_help()
        return 0
    logging.basicConfig(level=logging.WARNING)
    # what a long index build or cache warm-up builds and how far it is (runtime/build_progress)
    logging.getLogger("accelerator.build").setLevel(logging.INFO)
    silence_query_context_logs()   # they log each Spark error again, with a JVM stack
    try:
        return args.func(args)
    except (AcceleratorError, AnalysisException, RulesError) as exc:
        print(f"accelerator {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
