"""User rules from YAML, without a JVM: what a valid file means, and every error with its file,
line and column."""
from __future__ import annotations

from pathlib import Path

import pytest

from rules.terms import Priority
from rules.user_rules import (
    RulesError,
    files_root,
    load_rules,
    load_rules_file,
    scheme_less,
    source_matches,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "configs" / "rules.yaml"


def problems(text, **kwargs):
    with pytest.raises(RulesError) as found:
        load_rules(text, "rules.yaml", **kwargs)
    return [str(p) for p in found.value.problems]


def test_the_documented_example_is_valid():
    rules = load_rules_file(EXAMPLE)
    assert rules.budget.index_bytes == 20 << 30 and rules.budget.cache_bytes == 100 << 30
    assert rules.budget.max_indexes_per_source == 8 and rules.budget.build_seconds_per_run is None
    assert rules.default_priority is Priority.MEDIUM and rules.default_ttl_seconds == 7 * 86400
    bloom, covering, cache, never = rules.rules
    assert (bloom.kind, bloom.columns, bloom.priority) == ("bloom", ("trace_id",), Priority.ALWAYS)
    assert covering.included_columns == ("ts", "url") and covering.priority is Priority.MEDIUM
    assert cache.ttl_seconds == 36 * 3600 and cache.partitions.last_days == 3
    assert cache.format == "json" and cache.options == (("multiLine", "false"),)
    assert never.never and never.kind is None and never.line == 22
    assert bloom.describe().endswith("/lake/events: bloom on trace_id (priority ALWAYS; ttl P7D)")


def test_sources_match_with_any_scheme_and_as_globs():
    rules = load_rules_file(EXAMPLE)
    assert [r.kind for r in rules.for_source("hdfs://nn:8020/lake/events/")] == ["bloom", "covering"]
    assert rules.for_source("file:/lake/events2") == []
    assert [r.kind for r in rules.for_source("s3a://b/lake/raw/clickstream/eu")] == ["cache"]
    assert rules.for_source("/lake/raw/clickstream/eu/2026") == []     # * stays in one segment
    assert rules.never("file:/lake/archive/2019").source == "/lake/archive/*"
    assert rules.never("/lake/events") is None
    assert scheme_less("s3a://bucket/x/") == "/x" and scheme_less("file:/") == "/"


@pytest.mark.parametrize("written", ["/lake/events/*", "/lake/events/**", "/lake/events/*.parquet",
                                     "s3a://b/lake/events/date=*/*.json", "/lake/events/"])
def test_a_source_written_as_the_files_under_it_matches_that_source(written):
    assert source_matches(written, "hdfs://nn/lake/events")
    assert not source_matches(written, "/lake/events2") and not source_matches(written, "/lake")
    rules = load_rules(f"version: 1\nrules:\n  - {{source: '{written}', kind: bloom, "
                       "columns: [trace_id]}\n", "rules.yaml")
    assert [r.kind for r in rules.for_source("file:/lake/events")] == ["bloom"]


def test_files_root_is_the_directory_a_glob_of_files_names():
    assert files_root("/lake/events/**/*.json") == "/lake/events"
    assert files_root("/lake/*/events/*") == "/lake/*/events"    # a glob of sources, then files
    assert files_root("/lake/events") is None and files_root("/*") is None


def test_every_problem_is_reported_with_its_line_and_column():
    text = "\n".join([
        "version: 1",                               # 1
        "budjet: {indexBytes: 1g}",                 # 2
        "rules:",                                   # 3
        "  - source: /lake/a",                      # 4
        "    kind: blooom",                         # 5
        "    columns: [x]",                         # 6
        "  - source: /lake/b",                      # 7
        "    kind: cache",                          # 8
        "    columns: [y]",                         # 9
        "    ttl: P1M",                             # 10
        "    priorty: HIGH",                        # 11
        "  - source: /lake/c",                      # 12
        "    kind: minmax",                         # 13
        "    columns: [z]",                         # 14
        "    partitions: {column: d, lastDays: 0}", # 15
        "    priority: URGENT",                     # 16
    ])
    assert problems(text) == [
        "rules.yaml:2:1: unknown key 'budjet' in the rules file (did you mean 'budget'?)",
        "rules.yaml:5:11: unknown kind 'blooom': did you mean 'bloom'? expected one of covering, "
        "minmax, bloom, valuelist, text, cache",
        "rules.yaml:10:10: ttl: invalid duration 'P1M': expected an ISO-8601 duration such as "
        "PT30M, P7D, PT1H30M or P1DT2H; months and years are not supported (their length "
        "varies), use days (P30D)",
        "rules.yaml:11:5: unknown key 'priorty' in a rule (did you mean 'priority'?)",
        "rules.yaml:15:5: partitions is for cache rules only",
        "rules.yaml:15:39: lastDays must be a positive whole number, got 0",
        "rules.yaml:16:15: priority: invalid priority 'URGENT': expected one of ALWAYS, HIGH, "
        "MEDIUM, LOW, NEVER (case-insensitive)",
    ]


def test_structure_errors():
    assert problems("") == ["rules.yaml:1:1: the file is empty: expected 'version: 1' and "
                            "'rules:'"]
    assert problems("rules: []") == ["rules.yaml:1:1: missing 'version: 1'"]
    assert problems("version: 2\nrules: []") == ["rules.yaml:1:10: unsupported version: "
                                                 "expected 1"]
    assert problems("version: 1\nrules: {a: 1}") == [
        "rules.yaml:2:8: 'rules' must be a list of rules (each starting with '- ')"]
    assert problems("version: 1\nrules:\n  - kind: bloom\n    columns: [a]") == [
        "rules.yaml:3:5: a rule needs a 'source' (a root path or a glob)"]
    assert problems("version: 1\nrules:\n  - source: /a\n    columns: [a]") == [
        "rules.yaml:3:5: a rule needs a 'kind' (covering, minmax, bloom, valuelist, text, "
        "cache) unless its priority is NEVER"]
    assert problems("version: 1\nrules:\n  - source: /a\n    kind: text") == [
        "rules.yaml:3:5: a text rule needs 'columns'"]
    assert problems("version: 1\nrules:\n  - {source: /a, kind: bloom, columns: a}") == [
        "rules.yaml:3:40: columns must be a list of names, e.g. [a, b.c]"]
    assert problems("version: 1\nbudget: {indexBytes: lots}\nrules: []") == [
        "rules.yaml:2:22: indexBytes: invalid size 'lots': expected bytes or a number with a "
        "unit (k, m, g, t), e.g. 512m or 20g"]
    assert problems("version: 1\nrules: [\n") == [
        "rules.yaml:3:1: not valid YAML: expected the node content, but found '<stream end>'"]


def test_contradicting_and_repeated_rules():
    text = "\n".join([
        "version: 1",
        "rules:",
        "  - {source: /lake/a, kind: bloom, columns: [x], priority: HIGH}",
        "  - {source: /lake/a, kind: bloom, columns: [x], priority: LOW}",
        "  - {source: /lake/a, kind: minmax, columns: [y]}",
        "  - {source: /lake/a, kind: minmax, columns: [y]}",
        "  - {source: /lake/old/*, priority: NEVER}",
        "  - {source: /lake/old/2019, kind: cache, columns: [z]}",
    ])
    assert problems(text) == [
        "rules.yaml:4:5: this rule contradicts the rule at line 3 (bloom on x of /lake/a); "
        "keep one",
        "rules.yaml:6:5: this rule repeats the rule at line 5 (minmax on y of /lake/a); keep one",
        "rules.yaml:8:5: this rule asks for a cache on /lake/old/2019, which the NEVER rule at "
        "line 7 (/lake/old/*) forbids",
    ]


def test_columns_are_checked_against_the_source_when_it_is_known():
    text = "version: 1\nrules:\n  - {source: /lake/a, kind: covering, columns: [user.id], " \
           "includedColumns: [nope]}\n  - {source: /lake/new, kind: bloom, columns: [q]}"
    known = {"/lake/a": ["user", "ts"]}
    assert problems(text, columns_of=lambda rule: known.get(rule.source)) == [
        "rules.yaml:3:76: column 'nope' is not a column of /lake/a (it has ts, user)"]


def test_command_line_validates_a_rules_file(tmp_path, capsys):
    from accelerator.commands.cli import main

    assert main(["rules", "validate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "4 rules" in out and "/lake/archive/*: never index or cache\n" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nrules:\n  - {source: /a, kind: blom, columns: [x]}\n")
    assert main(["rules", "validate", str(bad)]) == 1
    assert capsys.readouterr().err == (
        f"{bad}:3:24: unknown kind 'blom': did you mean 'bloom'? expected one of covering, "
        "minmax, bloom, valuelist, text, cache\n")
