"""Settings are declared once (accelerator.runtime.settings.SETTINGS): Settings.read takes its defaults
from there, and the settings table of docs/settings.md and configs/spark-defaults.conf list exactly the
declared keys, defaults and meanings. No JVM."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from accelerator.runtime import settings
from accelerator.runtime.settings import SETTINGS, RuleSettings, Settings

ROOT = Path(__file__).resolve().parent.parent


def _readme_table() -> dict[str, tuple[str, str]]:
    """key -> (default, meaning) from the rows of docs/settings.md's table."""
    section = (ROOT / "docs" / "settings.md").read_text()
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        key, default, meaning = (cell.strip() for cell in line.strip().strip("|").split(" | "))
        assert key not in rows, f"{key} listed twice in docs/settings.md"
        rows[key.strip("`")] = (default.strip("`"), meaning)
    return rows


_CONF_LINE = re.compile(r"^(#\s*)?(spark\.accelerator\.\S+)\s+(.+?)\s*$")


def _conf_file() -> dict[str, tuple[str, bool]]:
    """key -> (value, commented out) from configs/spark-defaults.conf."""
    entries: dict[str, tuple[str, bool]] = {}
    for line in (ROOT / "configs" / "spark-defaults.conf").read_text().splitlines():
        found = _CONF_LINE.match(line)
        if found:
            key = found.group(2)
            assert key not in entries, f"{key} listed twice in spark-defaults.conf"
            entries[key] = (found.group(3), bool(found.group(1)))
    return entries


def test_keys_are_declared_once_under_spark_accelerator():
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys))
    assert all(k.startswith("spark.accelerator.") for k in keys)
    assert all(s.meaning and (s.default or s.derived) for s in SETTINGS)
    # the module constants other modules import are the declared keys
    for name in ("ENABLED", "SYSTEM_PATH", "VACUUM_RETENTION", "HISTORY_ENABLED",
                 "HISTORY_FLUSH_INTERVAL", "NUM_BUCKETS", "TEXT_CACHE_DIR"):
        assert getattr(settings, name) in keys


def test_readme_table_lists_the_declared_settings():
    table = _readme_table()
    assert list(table) == [s.key for s in SETTINGS]
    for s in SETTINGS:
        assert table[s.key] == (s.shown_default, s.meaning), s.key


def test_spark_defaults_conf_lists_the_declared_settings():
    conf = _conf_file()
    assert sorted(conf) == sorted(s.key for s in SETTINGS)
    for s in SETTINGS:
        # a derived default is no value to copy: shown, commented out
        assert conf[s.key] == (s.shown_default, bool(s.derived)), s.key


def test_read_takes_the_declared_defaults():
    read = Settings.read(lambda key, default: default)
    assert read.num_buckets is None   # auto: fitted to the index (indexes.covering.bucket_count)
    assert read.shuffle_partitions == 200
    assert read.cache_expiry_seconds == 10.0
    assert read.history_enabled is True
    assert read.history_flush_interval_seconds == 30.0
    assert read.filter_rule_bucket_spec is True and read.hybrid_scan is True
    assert (read.max_appended_ratio, read.max_deleted_ratio) == (0.3, 0.2)
    assert read.lineage is False
    assert read.optimize_bytes == 1 << 30
    assert read.vacuum_retention_seconds == 3600.0
    assert read.system_path == "spark-warehouse/indexes"
    assert read.text_cache_dir.endswith("spark-accelerator-text")
    asked: dict[str, str] = {}
    Settings.read(lambda key, default: asked.setdefault(key, default))
    RuleSettings.read(lambda key, default: asked.setdefault(key, default))
    for s in SETTINGS:
        if s.key != settings.ENABLED:   # read by the JVM rule and the session, not Settings
            assert asked[s.key] == s.default, s.key


def test_rule_engine_settings():
    read = RuleSettings.read(lambda key, default: default)
    assert read == RuleSettings(None, 7 * 86400, None, None, 8, 600.0)
    conf = {settings.RULES_PATH: "/r.yaml", settings.RULES_HALF_LIFE: "PT12H",
            settings.RULES_INDEX_BYTES: "2g", settings.RULES_CACHE_BYTES: "10g"}
    read = RuleSettings.read(lambda key, default: conf.get(key, default))
    assert (read.rules_path, read.half_life_seconds, read.index_bytes, read.cache_bytes) == (
        "/r.yaml", 12 * 3600, 2 << 30, 10 << 30)
    with pytest.raises(ValueError, match="spark.accelerator.rules.halfLife"):
        RuleSettings.read(lambda key, default: "7 days" if key == settings.RULES_HALF_LIFE
                          else default)


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
def test_a_bad_bucket_count_setting_is_named(value):
    with pytest.raises(ValueError, match="spark.accelerator.index.numBuckets must be 'auto' or a"):
        Settings.read(lambda key, default: value if key == settings.NUM_BUCKETS else default)


def test_read_uses_what_the_session_sets():
    conf = {settings.NUM_BUCKETS: "8", settings.HISTORY_FLUSH_INTERVAL: "2.5",
            settings.SYSTEM_PATH: "/sys", settings.OPTIMIZE_BYTES: "64m",
            settings.HISTORY_ENABLED: "FALSE", "spark.sql.warehouse.dir": "/w"}
    read = Settings.of_conf(conf)
    assert (read.num_buckets, read.history_flush_interval_seconds) == (8, 2.5)
    assert (read.system_path, read.optimize_bytes, read.history_enabled) == (
        "/sys", 64 << 20, False)
    assert Settings.of_conf({"spark.sql.warehouse.dir": "/w/"}).system_path == "/w/indexes"


@pytest.mark.parametrize("text, expected", [("10485760", 10485760), ("10MB", 10 << 20),
                                            ("-1", -1), ("64k", 64 << 10), ("1g", 1 << 30)])
def test_byte_size(text, expected):
    assert settings.byte_size(text) == expected
