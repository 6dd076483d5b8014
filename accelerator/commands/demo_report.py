"""What the demo reports of one query template, from what the runs showed: the times of vanilla
Spark and of the accelerated query measured in alternating pairs, whether their rows are the
same, and what the accelerator did as the physical plans and the files their scans read show it
(files read from an index or the cache, source files no longer read). Nothing is credited to an index
or the cache that the plan and the files read do not show, and a query whose plan is vanilla
Spark's is reported as "no change", without a ratio. Also the before/after figure (a small SVG).

Pure Python: the demo (:mod:`accelerator.commands.demo`) runs the queries and hands the
measurements here.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from html import escape
from urllib.parse import urlparse

#: what the report says instead of a ratio when the accelerator changed nothing
NO_CHANGE = "no change"
#: expression ids (``#123``, ``#123L``) and plan ids (``plan_id=4``), which differ between two
#: builds of the same query
_IDS = re.compile(r"#\d+L?\b|plan_id=\d+")


def local_path(path: str) -> str:
    """A path without its scheme (``file:///a/b`` and ``file:/a/b`` are ``/a/b``)."""
    return "/" + urlparse(path).path.lstrip("/")


def where_read(path: str, system_path: str) -> tuple[str, str | None]:
    """Where a file a query lists is: ``("source", None)``, ``("cache", None)`` (under the
    system path's ``_cache/``), or ``("index", <index directory>)`` (under the system path)."""
    root = local_path(system_path).rstrip("/") + "/"
    f = local_path(path)
    if not f.startswith(root):
        return "source", None
    rest = f[len(root):]
    return ("cache", None) if rest.startswith("_cache/") else ("index", rest.split("/", 1)[0])


def same_plan(vanilla: str, accelerated: str) -> bool:
    """Whether two physical plans' texts are the same plan (expression ids aside)."""
    return _IDS.sub("#", vanilla) == _IDS.sub("#", accelerated)


@dataclass(frozen=True)
class Effect:
    """What the accelerator did to one query, as its physical plan and files read show."""

    source_before: int                 # source files vanilla Spark lists
    source_after: int                  # source files the accelerated query lists
    index_files: dict[str, int]        # index directory → files read from it
    cache_files: int                   # cached copies read
    pruned_by: tuple[str, ...] = ()    # the pruning indexes that left source files out
    plan_changed: bool = True          # the accelerated plan is not vanilla Spark's

    @property
    def served(self) -> bool:
        """Whether the files read show that an index or the cache served the query."""
        return bool(self.index_files or self.cache_files or self.pruned_by)

    @property
    def credited(self) -> tuple[str, ...]:
        """The indexes (by directory name) and ``cache`` the files read show did something."""
        return (*sorted(self.index_files), *self.pruned_by,
                *(("cache",) if self.cache_files else ()))

    def describe(self) -> str:
        """One line: what was read instead of what vanilla Spark reads."""
        if not self.served:
            same = "same plan" if not self.plan_changed else "plan differs, no file read less"
            return f"{NO_CHANGE}: {_files(self.source_before)} of the source either way ({same})"
        parts = [f"{_files(n)} of index {name}" for name, n in sorted(self.index_files.items())]
        if self.cache_files:
            parts.append(f"{_files(self.cache_files, 'cached copy', 'cached copies')}")
        if self.source_after:
            parts.append(f"{_files(self.source_after)} of the source")
        line = f"read {' + '.join(parts)} where vanilla Spark reads {_files(self.source_before)}"
        skipped = self.source_before - self.source_after - self.cache_files
        if self.pruned_by and skipped > 0:
            line += f" ({', '.join(self.pruned_by)} skipped {skipped})"
        return line


def _files(n: int, one: str = "file", many: str = "files") -> str:
    return f"{n} {one if n == 1 else many}"


def effect(vanilla_files: list[str], accelerated_files: list[str], plans_same: bool,
           applied: list[str], system_path: str) -> Effect:
    """What the accelerator did to a query whose vanilla plan's scans read ``vanilla_files``
    and accelerated plan's ``accelerated_files``; ``applied`` names the indexes whyNot says applied
    (a pruning index is credited only when fewer source files, or cached copies of them, are
    read). When the plans are
    the same, nothing is credited, whatever ``applied`` says."""
    before = sum(1 for f in vanilla_files if where_read(f, system_path)[0] == "source")
    if plans_same:
        return Effect(before, before, {}, 0, (), plan_changed=False)
    after, cache, index = 0, 0, {}
    for f in accelerated_files:
        where, name = where_read(f, system_path)
        if where == "source":
            after += 1
        elif where == "cache":
            cache += 1
        else:
            index[name] = index.get(name, 0) + 1
    known = {n.lower() for n in index}
    pruned = tuple(sorted(n for n in applied if n != "cache" and n.lower() not in known)) \
        if after + cache < before else ()
    return Effect(before, after, index, cache, pruned)


@dataclass
class Pairs:
    """One template measured in alternating pairs: each pair's seconds and sorted rows of
    vanilla Spark and of the accelerated query."""

    vanilla: list[float] = field(default_factory=list)
    accelerated: list[float] = field(default_factory=list)
    same_rows: list[bool] = field(default_factory=list)

    def add(self, vanilla: float, accelerated: float, same_rows: bool) -> None:
        """One pair's times and whether its two runs gave the same rows."""
        self.vanilla.append(vanilla)
        self.accelerated.append(accelerated)
        self.same_rows.append(same_rows)

    @property
    def medians(self) -> tuple[float, float]:
        """The median seconds of vanilla Spark and of the accelerated query."""
        return statistics.median(self.vanilla), statistics.median(self.accelerated)


def speed_up(pairs: Pairs, what: Effect) -> str:
    """``4.2x`` (median vanilla over median accelerated), or :data:`NO_CHANGE` when nothing
    served the query (its time differences are noise, not the product's)."""
    if not what.served:
        return NO_CHANGE
    vanilla, accelerated = pairs.medians
    return f"{vanilla / accelerated:.1f}x"


HEADER = (f"{'template':<20} {'vanilla':>9} {'accel.':>9} {'speed-up':>9}  rows  "
          "what the accelerator did (the physical plans' file scans)")


def row(name: str, pairs: Pairs, what: Effect) -> str:
    """A template's line of the report (see :data:`HEADER`)."""
    vanilla, accelerated = pairs.medians
    return (f"{name:<20} {vanilla * 1000:>6.0f} ms {accelerated * 1000:>6.0f} ms "
            f"{speed_up(pairs, what):>9}  {'same' if all(pairs.same_rows) else 'DIFF'}  "
            f"{what.describe()}")


def figure(results: list[tuple[str, Pairs, Effect]], title: str) -> str:
    """An SVG bar chart: per template, the median time of vanilla Spark and of the accelerated
    query, labelled with the speed-up or "no change"."""
    width, left, bar, gap, top = 760, 170, 14, 18, 56
    longest = max((max(p.medians) for _, p, _ in results), default=1.0) or 1.0
    scale = (width - left - 150) / longest
    height = top + len(results) * (2 * bar + gap) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
           f'<rect x="{left}" y="30" width="12" height="10" fill="#9e9e9e"/>'
           f'<text x="{left + 16}" y="39">vanilla Spark</text>',
           f'<rect x="{left + 120}" y="30" width="12" height="10" fill="#1f77b4"/>'
           f'<text x="{left + 136}" y="39">accelerated (median of alternating pairs)</text>']
    for i, (name, pairs, what) in enumerate(results):
        y = top + i * (2 * bar + gap)
        vanilla, accelerated = pairs.medians
        out.append(f'<text x="{left - 8}" y="{y + bar + 4}" text-anchor="end">'
                   f'{escape(name)}</text>')
        for j, (seconds, colour) in enumerate(((vanilla, "#9e9e9e"), (accelerated, "#1f77b4"))):
            w = max(1.0, seconds * scale)
            out.append(f'<rect x="{left}" y="{y + j * bar}" width="{w:.1f}" height="{bar - 2}" '
                       f'fill="{colour}"/><text x="{left + w + 4:.1f}" y="{y + j * bar + 10}">'
                       f'{seconds * 1000:.0f} ms</text>')
        label = speed_up(pairs, what)
        out.append(f'<text x="{width - 10}" y="{y + bar + 4}" text-anchor="end" '
                   f'font-weight="bold">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
