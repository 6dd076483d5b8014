"""Index spec files for the command line: a source and an index config as a JSON or YAML
mapping (the format is in docs/cli.md), checked key by key with messages that
name the file and the key."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from indexes import kinds
from indexes.errors import AcceleratorError


class SpecError(AcceleratorError):
    """A spec file that cannot be read or does not describe a source and an index."""


_SOURCE_KEYS = {"path", "paths", "format", "options", "schema"}


def _keys(where: str, spec: Any, required: set[str], optional: set[str]) -> dict:
    """``spec`` as a mapping holding every ``required`` key and no key but those and
    ``optional``; SpecError naming ``where`` otherwise."""
    if not isinstance(spec, dict):
        raise SpecError(f"{where} must be a mapping, got {type(spec).__name__}")
    missing = sorted(required - spec.keys())
    unknown = sorted(spec.keys() - required - optional, key=str)
    if unknown:   # first: a misspelled key is also a missing one
        raise SpecError(f"{where} has unknown keys {', '.join(map(str, unknown))}; known: "
                        f"{', '.join(sorted(required | optional))}")
    if missing:
        raise SpecError(f"{where} lacks {', '.join(missing)}")
    return spec


def index_config(spec: Any, where: str = "index") -> Any:
    """The index config a spec's ``index`` mapping describes (see docs/cli.md):
    ``kind`` names an index kind (its ``spec_name``, or another of its names: see
    :func:`indexes.kinds.canonical_kind`), which reads the other keys."""
    found = spec.get("kind") if isinstance(spec, dict) else None
    kind = kinds.canonical_kind(found) if isinstance(found, str) else None
    if kind is None:
        raise SpecError(f"{where}: kind must be one of "
                        f"{', '.join(k.spec_name for k in kinds.KINDS)}, got {found!r}")
    _keys(where, spec, {"kind", "name"}, set(spec) - {"kind", "name"})
    fields = {k: v for k, v in spec.items() if k not in ("kind", "name")}
    return kind.config_from_spec(spec["name"], fields, where, _keys)


def source_fields(spec: Any, where: str = "source") -> dict:
    """A spec's ``source`` mapping, checked without Spark: ``path`` or ``paths``, ``format``
    (default parquet), read ``options`` and an optional DDL ``schema``."""
    fields = _keys(where, spec, set(), _SOURCE_KEYS)
    if ("path" in fields) == ("paths" in fields):
        raise SpecError(f"{where} needs exactly one of path (a string) and paths (a list)")
    paths = [fields["path"]] if "path" in fields else fields["paths"]
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise SpecError(f"{where}: paths must be a non-empty list of strings, got {paths!r}")
    options = fields.get("options") or {}
    if not isinstance(options, dict):
        raise SpecError(f"{where}: options must be a mapping, got {type(options).__name__}")
    return {"paths": paths, "format": fields.get("format", "parquet"), "options": options,
            "schema": fields.get("schema")}


@dataclass(frozen=True)
class Spec:
    """A spec file as read and checked (without Spark): its source and its index config."""

    source: dict
    config: Any

    def source_frame(self, spark: Any) -> Any:
        """The DataFrame the spec's source reads."""
        reader = spark.read.format(self.source["format"]).options(**self.source["options"])
        if self.source["schema"] is not None:
            reader = reader.schema(self.source["schema"])
        return reader.load(self.source["paths"])


def read_spec(path: str) -> Spec:
    """The :class:`Spec` of a JSON (``.json``) or YAML spec file; SpecError naming the file
    and the key at fault. Needs no Spark, so a bad file is reported before one starts."""
    try:
        text = Path(path).read_text()
        spec = json.loads(text) if path.lower().endswith(".json") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise SpecError(f"cannot read spec file {path}: {exc}") from None
    where = f"spec file {path}"
    fields = _keys(where, spec, {"source", "index"}, set())
    return Spec(source_fields(fields["source"], f"{where}: source"),
                index_config(fields["index"], f"{where}: index"))
