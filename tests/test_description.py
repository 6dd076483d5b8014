"""The typed source description (indexes/description.py), without a JVM: its JSON both ways,
keys it does not know, files as plain triples, and a log entry written before it existed."""
from __future__ import annotations

import json

from indexes.description import SourceDescription, SourceFile, source_files
from indexes.log import IndexLogEntry

FULL = {
    "format": "parquet",
    "table": "spark_catalog.db.t",
    "rootPaths": ["file:/w/db.db/t"],
    "partitionColumns": ["d"],
    "options": {"mergeSchema": "false"},
    "bucketed": False,
    "dataSchema": '{"type":"struct","fields":[]}',
    "fingerprint": "abc",
    "files": [["file:/w/db.db/t/d=1/a.parquet", 10, 99], ["file:/w/db.db/t/d=2/b.parquet", 7, 5]],
    "schema": [["id", "long"], ["d", "integer"]],
    "readSettings": {"spark.sql.session.timeZone": "UTC"},
    "sparkVersion": "4.0.1",
}


def test_a_full_description_round_trips():
    d = SourceDescription.from_json(FULL)
    assert d.format == "parquet" and d.table == "spark_catalog.db.t" and d.glob_path is None
    assert d.root_paths == ["file:/w/db.db/t"] and d.partition_columns == ["d"]
    assert d.options == {"mergeSchema": "false"} and d.bucketed is False
    assert d.data_schema == FULL["dataSchema"] and d.fingerprint == "abc"
    assert d.files == (SourceFile("file:/w/db.db/t/d=1/a.parquet", 10, 99),
                       SourceFile("file:/w/db.db/t/d=2/b.parquet", 7, 5))
    assert d.schema == FULL["schema"] and d.read_settings == FULL["readSettings"]
    assert d.spark_version == "4.0.1" and d.extra == {}
    assert d.to_json() == FULL
    assert json.dumps(d.to_json(), sort_keys=True) == json.dumps(FULL, sort_keys=True)
    assert SourceDescription.from_json(d.to_json()) == d


def test_absent_keys_stay_absent_and_nulls_stay_null():
    d = SourceDescription.from_json({"format": "text", "rootPaths": ["file:/x"],
                                     "fingerprint": None, "files": None})
    assert d.fingerprint is None and d.fingerprinted and d.files is None and d.files_described
    assert d.to_json() == {"format": "text", "rootPaths": ["file:/x"], "fingerprint": None,
                           "files": None}
    bare = SourceDescription.from_json({"format": "text"})
    assert not bare.fingerprinted and not bare.files_described
    assert bare.to_json() == {"format": "text"}
    assert SourceDescription.from_json(None).to_json() == {} == SourceDescription().to_json()


def test_unknown_keys_are_kept_and_written_back():
    newer = {**FULL, "snapshotId": 12, "catalogKind": "rest"}
    d = SourceDescription.from_json(newer)
    assert d.extra == {"snapshotId": 12, "catalogKind": "rest"}
    assert d.to_json() == newer


def test_completing_a_description_keeps_the_json_a_dict_update_gave():
    payload = {"format": "parquet", "rootPaths": ["file:/x"], "options": {}}
    d = SourceDescription.from_json(payload).with_read_settings({"k": "v"})
    listed = SourceDescription.from_json({**payload, "fingerprint": None, "files": None})
    assert d.with_listing(listed).to_json() == {**payload, "readSettings": {"k": "v"},
                                                "fingerprint": None, "files": None}
    files = d.with_files([["file:/x/a", 1, 2]])
    assert files.files == (SourceFile("file:/x/a", 1, 2),) and files.files_described
    assert files.to_json()["files"] == [["file:/x/a", 1, 2]]
    assert d.with_files(None).to_json()["files"] is None
    assert d.to_json() == {**payload, "readSettings": {"k": "v"}}   # unchanged: frozen


def test_files_equal_and_hash_like_tuples():
    f = SourceFile("file:/a", 10, 99)
    assert f == ("file:/a", 10, 99, None) and hash(f) == hash(("file:/a", 10, 99, None))
    assert set(source_files([["file:/a", 10, 99]])) == {f}
    assert f in {("file:/a", 10, 99, None)}
    assert (f.path, f.size, f.mtime) == ("file:/a", 10, 99)
    assert json.dumps(f.to_json()) == '["file:/a", 10, 99]'
    listed = source_files([f])
    assert source_files(listed) is listed   # a listing kept by identity stays the same object


def test_an_old_log_entry_reads_and_writes_back_the_same():
    old = {"id": 1, "name": "idx", "kind": "covering", "state": "ACTIVE", "timestamp": 5,
           "config": {"indexedColumns": ["id"]},
           "source": {"format": "parquet", "rootPaths": ["file:/lake/t"], "partitionColumns": [],
                      "options": {}, "fingerprint": "f", "files": [["file:/lake/t/a", 10, 99]],
                      "schema": [["id", "long"]]},
           "content": {"dataVersion": 0}, "properties": {}}
    text = json.dumps(old, sort_keys=True, indent=2)
    entry = IndexLogEntry.from_json(text)
    assert isinstance(entry.source, SourceDescription)
    assert entry.source.files == (SourceFile("file:/lake/t/a", 10, 99),)
    assert entry.source.read_settings is None and entry.source.spark_version is None
    assert entry.to_json() == text
    empty = IndexLogEntry.from_json(json.dumps({**old, "source": {}}))
    assert empty.source == SourceDescription() and empty.to_dict()["source"] == {}


DELTA = {"format": "parquet", "rootPaths": ["file:/lake/t"], "partitionColumns": [],
         "options": {}, "bucketed": False, "tableFormat": "delta", "tableVersion": 3,
         "dataSchema": "{}", "fingerprint": "f", "deletionVectors": 1,
         "files": [["file:/lake/t/a.parquet", 10, 1], ["file:/lake/t/b.parquet", 20, 2, "dv1"]]}


def test_a_delta_description_round_trips_with_its_deletion_vectors():
    d = SourceDescription.from_json(DELTA)
    assert d.table_format == "delta" and d.table_version == 3 and d.deletion_vectors == 1
    assert d.files[0].deletion_vector is None and d.files[1].deletion_vector == "dv1"
    assert json.dumps(d.to_json()) == json.dumps(DELTA)
    assert d.read_format == "delta"
    assert SourceDescription.from_json({**DELTA, "tableFormat": None}).read_format == "parquet"


def test_a_file_whose_deletion_vector_changed_is_another_file():
    before = SourceFile("file:/lake/t/b.parquet", 20, 2)
    after = SourceFile("file:/lake/t/b.parquet", 20, 2, "dv1")
    assert before != after and len({before, after}) == 2
    assert before.to_json() == ["file:/lake/t/b.parquet", 20, 2]
    assert after.to_json() == ["file:/lake/t/b.parquet", 20, 2, "dv1"]


def test_plain_files_says_what_a_copy_read_as_parquet_would_lose():
    plain = SourceDescription.from_json({**DELTA, "deletionVectors": None})
    assert plain.plain_files is None
    assert SourceDescription.from_json(DELTA).plain_files == "1 of its files carry deletion vectors"
    mapped = SourceDescription.from_json({**DELTA, "deletionVectors": None, "columnMapping": "id"})
    assert mapped.plain_files == "it maps columns to physical names (column mapping mode id)"
    assert mapped.to_json()["columnMapping"] == "id"
