"""User rules: what a user asks the rule engine to index, cache or never touch, from one YAML file.

Pure Python over plain values (``yaml.safe_load``'s loader, no Spark). Every problem found names
the file, line and column of the value at fault; all problems of a file are reported at once
(:class:`RulesError`). The example is ``configs/rules.yaml``::

    version: 1
    budget: {indexBytes: 20g, cacheBytes: 100g, maxIndexesPerSource: 8}
    defaults: {priority: MEDIUM, ttl: P7D}
    rules:
      - source: "/lake/events"          # a root path or a glob, scheme-less
        columns: [trace_id]
        kind: bloom                      # covering | minmax | bloom | valuelist | text | cache
        priority: ALWAYS
      - source: "/lake/archive/*"
        priority: NEVER                  # never indexed or cached by the engine

Precedence (applied by the engine): NEVER > a user rule > the engine's own choices.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Optional

import yaml

from rules.history.records import scheme_less
from rules.terms import Priority, TermError, byte_size, format_duration, parse_duration, \
    parse_priority

VERSION = 1
#: rule kinds: the index kinds the engine can build (the ``engine_kinds`` of the index kinds in
#: ``indexes.kinds``), and the cache
RULE_KINDS = ("covering", "minmax", "bloom", "valuelist", "text", "cache")
#: the top-level keys that hold rules, also in the scheduler's configuration file
RULE_SECTIONS = ("budget", "defaults", "rules")
_TOP = ("version", *RULE_SECTIONS)
_BUDGET = ("indexBytes", "cacheBytes", "maxIndexesPerSource", "buildSecondsPerRun")
_DEFAULTS = ("priority", "ttl")
_RULE = ("source", "kind", "columns", "includedColumns", "priority", "ttl", "partitions",
         "format", "options", "schema")
_PARTITIONS = ("column", "lastDays")


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a rules file, at a 1-based line and column."""

    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


class RulesError(ValueError):
    """A rules file that cannot be used; ``problems`` lists every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(frozen=True)
class Budget:
    """Limits the engine chooses within (None: the engine's default)."""

    index_bytes: int | None = None
    cache_bytes: int | None = None
    max_indexes_per_source: int | None = None
    build_seconds_per_run: float | None = None


@dataclass(frozen=True)
class PartitionWindow:
    """"The last N days are hot": the partitions of ``column`` from today back N-1 days."""

    column: str
    last_days: int


def source_matches(source: str, root: str, compiled: re.Pattern | None = None) -> bool:
    """Whether the source root path ``root`` (any scheme) is ``source``, a root path or a glob
    (``compiled``: its regex, when known): equal to it or matching it, both scheme-less; or
    ``source`` names files under ``root`` (see :func:`files_root`)."""
    path, wanted = scheme_less(root), scheme_less(source)
    if path == wanted or (compiled or _glob_regex(wanted)).fullmatch(path) is not None:
        return True
    under = files_root(wanted)
    return under is not None and source_matches(under, path)


_GLOB_CHARACTERS = re.compile(r"[*?\[]")


def files_root(pattern: str) -> str | None:
    """The directory whose files (or subdirectories) a glob names by its last segments, so
    that the source rooted there is meant: ``/lake/events/*``, ``/lake/events/**`` and
    ``/lake/events/date=*/*.json`` name the files of ``/lake/events``; None when the last
    segment has no glob character or nothing is left."""
    parts = pattern.rstrip("/").split("/")
    kept = len(parts)
    while kept > 1 and _GLOB_CHARACTERS.search(parts[kept - 1]):
        kept -= 1
    if kept == len(parts) or kept == 1:
        return None
    return "/".join(parts[:kept])


def _glob_regex(pattern: str) -> re.Pattern:
    """A path glob: ``*`` and ``?`` within one path segment, ``**`` across segments,
    ``[abc]`` a character class."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                out.append("[" + pattern[i + 1:end].replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


@dataclass(frozen=True)
class UserRule:
    """One rule as understood. ``kind`` and ``columns`` are empty for a NEVER rule that names
    only a source; ``line`` and ``column`` locate it in its file."""

    source: str
    kind: str | None
    columns: tuple[str, ...]
    included_columns: tuple[str, ...]
    priority: Priority
    ttl_seconds: int | None
    partitions: PartitionWindow | None = None
    format: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    schema: str | None = None
    file: str = ""
    line: int = 0
    column: int = 0
    _pattern: re.Pattern | None = field(default=None, repr=False, compare=False)

    @property
    def never(self) -> bool:
        return self.priority is Priority.NEVER

    def matches(self, root: str) -> bool:
        """Whether the source root path ``root`` (any scheme) is this rule's source: equal to
        it or matching it as a glob, both scheme-less."""
        return source_matches(self.source, root, self._pattern)

    def describe(self) -> str:
        """One line: the rule as understood."""
        what = "never index or cache" if self.never and not self.kind else (
            f"{self.kind} on {', '.join(self.columns)}")
        extra = []
        if self.included_columns:
            extra.append(f"including {', '.join(self.included_columns)}")
        if not self.never:
            extra.append(f"priority {self.priority.name}")
        if self.ttl_seconds is not None:
            extra.append(f"ttl {format_duration(self.ttl_seconds)}")
        if self.partitions:
            extra.append(f"partitions {self.partitions.column} last {self.partitions.last_days} "
                         "days")
        if self.format:
            extra.append(f"read as {self.format}")
        return (f"{self.file}:{self.line}: {self.source}: {what}"
                + (f" ({'; '.join(extra)})" if extra else ""))


#: ``columns_of(rule)``: the top-level columns of a rule's source, None when unknown
ColumnsOf = Callable[[UserRule], Optional[Collection[str]]]


@dataclass(frozen=True)
class RuleSet:
    """A validated rules file."""

    rules: tuple[UserRule, ...] = ()
    budget: Budget = Budget()
    default_priority: Priority = Priority.MEDIUM
    default_ttl_seconds: int | None = None

    def for_source(self, root: str) -> list[UserRule]:
        """The rules whose source matches ``root``, in file order."""
        return [r for r in self.rules if r.matches(root)]

    def never(self, root: str) -> UserRule | None:
        """The first NEVER rule covering ``root`` (the engine then neither indexes nor caches
        it), or None."""
        return next((r for r in self.rules if r.never and r.matches(root)), None)


# --- loading ------------------------------------------------------------------------------
class Reader:
    """Walks the YAML node tree, collecting problems with their positions (also used by the
    scheduler's configuration, whose file holds the same rule sections)."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[Problem] = []

    def compose(self, text: str, expected: str) -> yaml.Node | None:
        """The node tree of ``text``, or None (with the problem recorded) when it is not valid
        YAML or is empty (``expected`` says what it should hold)."""
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            self.problems.append(Problem(self.file, mark.line + 1 if mark else 1,
                                         mark.column + 1 if mark else 1,
                                         f"not valid YAML: {exc.problem}"))
            return None
        if root is None:
            self.problems.append(Problem(self.file, 1, 1, f"the file is empty: {expected}"))
        return root

    def version(self, root: yaml.Node | None,
                top: dict[str, tuple[yaml.Node, yaml.Node]]) -> None:
        """Checks the top-level mapping's ``version`` key (required, :data:`VERSION`)."""
        if "version" not in top and isinstance(root, yaml.MappingNode):
            self.problem(root, f"missing 'version: {VERSION}'")
        elif "version" in top:
            node = top["version"][1]
            if self.scalar(node, "version") != VERSION:
                self.problem(node, f"unsupported version: expected {VERSION}")

    def raise_problems(self, error: type[RulesError] = RulesError) -> None:
        """Raises ``error`` listing every problem found, in file order, if there is any."""
        if self.problems:
            raise error(sorted(self.problems, key=lambda p: (p.line, p.column)))

    def problem(self, node: yaml.Node, message: str) -> None:
        mark = node.start_mark
        self.problems.append(Problem(self.file, mark.line + 1, mark.column + 1, message))

    def mapping(self, node: yaml.Node, allowed: Iterable[str], what: str
                ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """A mapping's keys to (key node, value node); unknown keys are problems naming the
        closest allowed one."""
        if not isinstance(node, yaml.MappingNode):
            self.problem(node, f"{what} must be a mapping")
            return {}
        allowed = list(allowed)
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name not in allowed:
                close = difflib.get_close_matches(str(name), allowed, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else \
                    f" (expected one of {', '.join(allowed)})"
                self.problem(key, f"unknown key '{name}' in {what}{hint}")
            elif name in out:
                self.problem(key, f"'{name}' is given twice in {what}")
            else:
                out[name] = (key, value)
        return out

    def scalar(self, node: yaml.Node, what: str) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            self.problem(node, f"{what} must be a single value")
            return None
        return _construct(node)

    def text(self, node: yaml.Node, what: str) -> str | None:
        value = self.scalar(node, what)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.problem(node, f"{what} must be a non-empty string")
            return None
        return value.strip()

    def strings(self, node: yaml.Node, what: str, item: str = "a column") -> tuple[str, ...]:
        if not isinstance(node, yaml.SequenceNode):
            self.problem(node, f"{what} must be a list of names, e.g. [a, b.c]")
            return ()
        out = [self.text(item, f"each of {what}") for item in node.value]
        if any(o is None for o in out):
            return ()
        if len(set(out)) != len(out):
            self.problem(node, f"{what} names {item} twice")
        return tuple(o for o in out if o)

    def number(self, node: yaml.Node, what: str, integer: bool) -> float | None:
        value = self.scalar(node, what)
        ok = isinstance(value, int) and not isinstance(value, bool) if integer else \
            isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or value <= 0:
            self.problem(node, f"{what} must be a positive {'whole ' if integer else ''}number, "
                               f"got {value!r}")
            return None
        return value

    def term(self, node: yaml.Node, parse: Callable[[str], Any], what: str) -> Any:
        value = self.scalar(node, what)
        if value is None:
            return None
        try:
            return parse(str(value))
        except TermError as exc:
            self.problem(node, f"{what}: {exc}")
            return None


def _construct(node: yaml.ScalarNode) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def load_rules(text: str, file: str = "<rules>",
               columns_of: ColumnsOf | None = None) -> RuleSet:
    """The rules of a YAML document; :class:`RulesError` listing every problem (with file, line
    and column). ``columns_of(rule)``, when given, returns the columns a rule's source has
    (top-level names, or None when unknown): a rule naming another column is a problem."""
    reader = Reader(file)
    root = reader.compose(text, "expected 'version: 1' and 'rules:'")
    top = reader.mapping(root, _TOP, "the rules file") if root is not None else {}
    reader.version(root, top)
    found = read_rule_sections(reader, top, columns_of)
    reader.raise_problems()
    return found


def load_rules_file(path: str | Path,
                    columns_of: ColumnsOf | None = None) -> RuleSet:
    """:func:`load_rules` of a file (its path named in every problem)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RulesError([Problem(str(path), 1, 1, f"cannot read the rules file: {exc}")]) \
            from None
    return load_rules(text, str(path), columns_of)


def read_rule_sections(reader: Reader, top: dict[str, tuple[yaml.Node, yaml.Node]],
                       columns_of: ColumnsOf | None = None) -> RuleSet:
    """The :data:`RULE_SECTIONS` of a top-level mapping (key to its key and value nodes, as
    :meth:`Reader.mapping` returns it), their problems recorded in ``reader``."""
    budget = _budget(reader, top["budget"][1]) if "budget" in top else Budget()
    priority, ttl = Priority.MEDIUM, None
    if "defaults" in top:
        defaults = reader.mapping(top["defaults"][1], _DEFAULTS, "defaults")
        if "priority" in defaults:
            found = reader.term(defaults["priority"][1], parse_priority, "default priority")
            priority = priority if found is None else found
        if "ttl" in defaults:
            ttl = reader.term(defaults["ttl"][1], parse_duration, "default ttl")
    rules: list[UserRule] = []
    if "rules" in top:
        node = top["rules"][1]
        if not isinstance(node, yaml.SequenceNode):
            reader.problem(node, "'rules' must be a list of rules (each starting with '- ')")
        else:
            for item in node.value:
                rule = _rule(reader, item, priority, ttl, columns_of)
                if rule is not None:
                    rules.append(rule)
    _contradictions(reader, rules)
    return RuleSet(tuple(rules), budget, priority, ttl)


def _budget(reader: Reader, node: yaml.Node) -> Budget:
    keys = reader.mapping(node, _BUDGET, "budget")

    def get(name: str, read: Callable[[yaml.Node], Any]) -> Any:
        return read(keys[name][1]) if name in keys else None

    return Budget(
        index_bytes=get("indexBytes", lambda n: reader.term(n, byte_size, "indexBytes")),
        cache_bytes=get("cacheBytes", lambda n: reader.term(n, byte_size, "cacheBytes")),
        max_indexes_per_source=get("maxIndexesPerSource",
                                   lambda n: reader.number(n, "maxIndexesPerSource", True)),
        build_seconds_per_run=get("buildSecondsPerRun",
                                  lambda n: reader.number(n, "buildSecondsPerRun", False)))


def _rule(reader: Reader, node: yaml.Node, default_priority: Priority,
          default_ttl: int | None,
          columns_of: ColumnsOf | None) -> UserRule | None:
    before = len(reader.problems)
    keys = reader.mapping(node, _RULE, "a rule")
    if not keys:
        return None

    def value(name: str) -> yaml.Node | None:
        return keys[name][1] if name in keys else None

    source = reader.text(value("source"), "source") if "source" in keys else None
    if "source" not in keys:
        reader.problem(node, "a rule needs a 'source' (a root path or a glob)")
    priority = default_priority
    if "priority" in keys:
        found = reader.term(value("priority"), lambda t: parse_priority(t, allow_never=True),
                            "priority")
        priority = default_priority if found is None else found
    never = priority is Priority.NEVER
    kind = None
    if "kind" in keys:
        kind = reader.text(value("kind"), "kind")
        if kind is not None and kind.lower() not in RULE_KINDS:
            close = difflib.get_close_matches(kind.lower(), RULE_KINDS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            reader.problem(value("kind"), f"unknown kind '{kind}': {hint}expected one of "
                                          f"{', '.join(RULE_KINDS)}")
            kind = None
        elif kind is not None:
            kind = kind.lower()
    elif not never:
        reader.problem(node, f"a rule needs a 'kind' ({', '.join(RULE_KINDS)}) unless its priority "
                             "is NEVER")
    columns = reader.strings(value("columns"), "columns") if "columns" in keys else ()
    if not columns and kind is not None and "columns" not in keys:
        reader.problem(node, f"a {kind} rule needs 'columns'")
    included = ()
    if "includedColumns" in keys:
        included = reader.strings(value("includedColumns"), "includedColumns")
        if kind is not None and kind != "covering":
            reader.problem(keys["includedColumns"][0],
                           "includedColumns is for covering rules only")
    ttl = None if never else default_ttl
    if "ttl" in keys:
        ttl = reader.term(value("ttl"), parse_duration, "ttl")
    window = None
    if "partitions" in keys:
        window = read_partitions(reader, value("partitions"))
        if kind is not None and kind != "cache":
            reader.problem(keys["partitions"][0], "partitions is for cache rules only")
    fmt = reader.text(value("format"), "format") if "format" in keys else None
    options: tuple[tuple[str, str], ...] = ()
    if "options" in keys:
        opts = reader.mapping(value("options"), _any_key(value("options")), "options")
        options = tuple(sorted((k, str(reader.scalar(v, f"option {k}")))
                               for k, (_, v) in opts.items()))
    schema = reader.text(value("schema"), "schema") if "schema" in keys else None
    if (options or schema) and fmt is None:
        reader.problem(node, "'options' and 'schema' need the 'format' they read with")
    if len(reader.problems) > before or source is None:
        return None
    mark = node.start_mark
    rule = UserRule(source, kind, columns, included, priority, ttl, window, fmt, options, schema,
                    reader.file, mark.line + 1, mark.column + 1,
                    _glob_regex(scheme_less(source)))
    known = columns_of(rule) if columns_of is not None and (columns or included) else None
    if known is not None:
        names = set(known)
        for name, what in [(c, "columns") for c in columns] + \
                          [(c, "includedColumns") for c in included]:
            if name.split(".", 1)[0] not in names and name not in names:
                reader.problem(value(what), f"column '{name}' is not a column of {source} "
                                            f"(it has {', '.join(sorted(names))})")
    return None if len(reader.problems) > before else rule


def _any_key(node: yaml.Node | None) -> list[str]:
    """Every key of a mapping node (options may be anything)."""
    if not isinstance(node, yaml.MappingNode):
        return []
    return [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]


def read_partitions(reader: Reader, node: yaml.Node) -> PartitionWindow | None:
    """The partition window ``{column: NAME, lastDays: N}`` of ``node`` (None after a problem)."""
    keys = reader.mapping(node, _PARTITIONS, "partitions")
    if set(keys) != set(_PARTITIONS):
        reader.problem(node, "partitions needs 'column' and 'lastDays', e.g. "
                             "{column: event_date, lastDays: 3}")
        return None
    column = reader.text(keys["column"][1], "partitions column")
    days = reader.number(keys["lastDays"][1], "lastDays", True)
    return PartitionWindow(column, int(days)) if column and days else None


def _contradictions(reader: Reader, rules: list[UserRule]) -> None:
    """Rules that cannot all hold: the same request twice, or a request for a source a NEVER
    rule with the same source covers."""
    seen: dict[tuple, UserRule] = {}
    for rule in rules:
        key = (scheme_less(rule.source), rule.kind, tuple(sorted(rule.columns)))
        first = seen.get(key)
        if first is not None and rule.kind is not None:
            what = "contradicts" if first.priority != rule.priority else "repeats"
            reader.problems.append(Problem(
                rule.file, rule.line, rule.column,
                f"this rule {what} the rule at line {first.line} ({rule.kind} on "
                f"{', '.join(rule.columns)} of {rule.source}); keep one"))
        seen.setdefault(key, rule)
    for never in (r for r in rules if r.never):
        for rule in rules:
            if rule is not never and not rule.never and never.matches(rule.source):
                reader.problems.append(Problem(
                    rule.file, rule.line, rule.column,
                    f"this rule asks for a {rule.kind} on {rule.source}, which the NEVER rule "
                    f"at line {never.line} ({never.source}) forbids"))
