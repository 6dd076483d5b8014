"""``accelerator init [DIR]``: a commented starter configuration written into a directory,
from the examples installed with the package (``accelerator/configs``, also ``configs/`` of a
checkout): the scheduler's configuration ``accelerator.yaml`` (its ``systemPath`` set to the
system path the command line would use, its session pointed at the pools file), the rule
engine's ``rules.yaml`` and the FAIR scheduler's ``fairscheduler.xml``. Existing files are
kept unless ``--force``; nothing is written when one of them would be overwritten."""
from __future__ import annotations

import argparse
import json
from importlib import resources
from pathlib import Path

from accelerator.commands import system_path
from indexes.errors import AcceleratorError

#: the files ``init`` writes, as the package holds them
FILES = ("accelerator.yaml", "rules.yaml", "fairscheduler.xml")
_EXAMPLE_SYSTEM_PATH = "systemPath: /lake/_accelerator"
_EXAMPLE_SPARK = 'spark: {master: "local[2]", conf: {spark.driver.memory: 4g}}'


class InitError(AcceleratorError):
    """``init`` would overwrite files (without ``--force``)."""


def example(name: str) -> str:
    """The text of one of the package's example files (:data:`FILES`)."""
    return resources.files("accelerator").joinpath("configs", name).read_text()


def starter_files(directory: Path, system: str) -> dict[str, str]:
    """What ``init`` writes into ``directory``, by file name: the examples, the configuration
    serving the system path ``system`` in a session using the written pools file."""
    config = example("accelerator.yaml")
    assert _EXAMPLE_SYSTEM_PATH in config and _EXAMPLE_SPARK in config, "example changed"
    pools = str((directory / "fairscheduler.xml").resolve())
    config = config.replace(_EXAMPLE_SYSTEM_PATH, f"systemPath: {json.dumps(system)}").replace(
        _EXAMPLE_SPARK, 'spark: {master: "local[2]", conf: {spark.driver.memory: 4g, '
        f"spark.scheduler.allocation.file: {json.dumps(pools)}}}}}")
    return {"accelerator.yaml": _example_sources_commented(config),
            "rules.yaml": example("rules.yaml"),
            "fairscheduler.xml": example("fairscheduler.xml")}


def _example_sources_commented(config: str) -> str:
    """``config`` with the example's rules and jobs over its ``/lake/...`` sources commented
    out (each such list item whole), so that a service started before any edit runs only the
    jobs that need no source (advise, refresh, optimize, evict, vacuum) instead of failing a
    warm-up of a source that does not exist every morning."""
    out, item, sourced = [], [], False

    def flush() -> None:
        out.extend((f"# {line}" if sourced else line) for line in item)
        item.clear()

    for line in config.splitlines():
        if line.startswith("  - ") or not line.startswith("    "):
            flush()
            sourced = line.startswith("  - ") and "/lake/" in line
        sourced = sourced or (bool(item) and line.startswith("    ") and "/lake/" in line)
        (item if line.startswith(("  - ", "    ")) else out).append(line)
    flush()
    text = "\n".join(out) + "\n"
    return text.replace("\nrules:\n#", "\nrules: []   # examples: uncomment (dropping the []) and name your sources\n#"
                        ).replace("\njobs:\n#", "\njobs:   # the warm-up example: uncomment and "
                                  "name your source\n#")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Adds ``init`` to the command line's subcommands ``sub``."""
    text = ("write a commented starter configuration into DIR: accelerator.yaml (the "
            "scheduler's jobs and rules, for `accelerator serve`), rules.yaml (the rule "
            "engine's rules) and fairscheduler.xml (the FAIR pools of serve's session)")
    p = sub.add_parser("init", help=text, description=text + ". Existing files are kept "
                       "unless --force. Spark is not started.")
    p.add_argument("dir", nargs="?", default=".", help="the directory (default: the current "
                   "one, where the commands look for accelerator.yaml)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument("--system-path", help="the systemPath to write (default: as the other "
                   f"commands find it: ${system_path.SYSTEM_PATH_VARIABLE}, spark-defaults.conf, "
                   "<spark.sql.warehouse.dir>/indexes)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Writes the starter files; InitError naming the existing ones without ``--force``."""
    directory = Path(args.dir)
    system = system_path.resolve(args.system_path, None).path
    files = starter_files(directory, system)
    existing = [str(directory / n) for n in files if (directory / n).exists()]
    if existing and not args.force:
        raise InitError(f"{', '.join(existing)} already exist(s); nothing written (--force "
                        "overwrites)")
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
        print(f"wrote {directory / name}")
    config = directory / "accelerator.yaml"
    print(f"system path: {system}\nnext: edit the rules and jobs in {config} (the examples "
          f"name /lake/... sources), check it with `accelerator config validate {config}`, "
          f"then run `accelerator serve --config {config}`")
    return 0
