"""Validation of covering index configurations: every invalid input gets a clear message."""
from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType, IntegerType, MapType, StringType, StructField, StructType,
)

from accelerator import (
    CoveringIndexConfig, Hyperspace, IndexConfig, InvalidIndexConfigError, UnsupportedSourceError,
)

SCHEMA = StructType([
    StructField("id", IntegerType()),
    StructField("name", StringType()),
    StructField("tags", ArrayType(StringType())),
    StructField("attrs", MapType(StringType(), StringType())),
    StructField("nested", StructType([
        StructField("field1", StringType()),
        StructField("nst", StructType([StructField("field1", StringType()),
                                       StructField("field2", StringType())])),
    ])),
    StructField("nested__nst__field2", StringType()),
])


def resolve(indexed, included=(), name="idx", case_sensitive=False):
    return CoveringIndexConfig(name, indexed, list(included)).resolve(SCHEMA, case_sensitive)


def test_index_config_is_an_alias():
    assert IndexConfig is CoveringIndexConfig


def test_resolves_nested_paths_to_flat_names():
    indexed, included = resolve(["NESTED.nst.Field1"], ["id", "nested.field1"])
    assert [c.name for c in indexed] == ["nested__nst__field1"]
    assert [c.path for c in included] == [("id",), ("nested", "field1")]


@pytest.mark.parametrize("config, message", [
    (("", ["id"]), "invalid index name ''"),
    (("a/b", ["id"]), "invalid index name 'a/b'"),
    (("../x", ["id"]), "invalid index name"),
    (("idx", []), "indexedColumns is empty"),
    (("idx", ["id", "ID"]), "'ID' is listed more than once|'id' is listed more than once"),
    (("idx", ["id"], ["name", "Name"]), "listed more than once"),
    (("idx", ["id"], ["id"]), "'id' is listed more than once"),
    (("idx", ["nested.nst.field1"], ["nested"]), "overlap"),
    (("idx", ["nested.nst.field1"], ["nested.nst"]), "overlap"),
    (("idx", ["nme"]), "column 'nme' does not exist; did you mean 'name'"),
    (("idx", ["nested.nst.feld1"]), "does not exist; did you mean 'nested.nst.field1'"),
    (("idx", ["id.x"]), "column 'id.x' does not exist"),
    (("idx", ["tags"]), "indexed column 'tags' has type array<string>"),
    (("idx", ["attrs"]), "has type map<string,string>"),
    (("idx", ["nested.nst"]), "structs cannot be indexed"),
    (("idx", ["id"], ["nested.nst.field2"]), "collides with the existing column 'nested__nst__field2'"),
])
def test_invalid_configs(config, message):
    name, indexed, *rest = config
    with pytest.raises(InvalidIndexConfigError, match=message):
        resolve(indexed, rest[0] if rest else (), name=name)


def test_case_sensitive_resolution():
    with pytest.raises(InvalidIndexConfigError, match="'ID' does not exist"):
        resolve(["ID"], case_sensitive=True)
    indexed, _ = resolve(["id"], ["name", "NAME"][:1], case_sensitive=True)
    assert indexed[0].path == ("id",)


def test_num_buckets_must_be_positive():
    with pytest.raises(InvalidIndexConfigError, match="numBuckets must be a positive integer"):
        CoveringIndexConfig("idx", ["id"], numBuckets=0).resolve(SCHEMA, False)


def test_non_file_dataframes_are_rejected(spark, system_path, tmp_path):
    hs = Hyperspace(spark)
    path = str(tmp_path / "t")
    spark.range(10).write.parquet(path)
    config = IndexConfig("idx", ["id"])
    for df in (spark.range(10), spark.read.parquet(path).filter("id > 1"),
               spark.createDataFrame([(1,)], "id long")):
        with pytest.raises(UnsupportedSourceError, match="reads files directly"):
            hs.createIndex(df, config)
    assert hs.indexes().count() == 0


def test_create_rejects_a_non_config(spark, system_path, tmp_path):
    path = str(tmp_path / "t")
    spark.range(3).write.parquet(path)
    with pytest.raises(InvalidIndexConfigError, match="expects an IndexConfig"):
        Hyperspace(spark).createIndex(spark.read.parquet(path), {"indexName": "x"})


def test_refresh_mode_validated(spark, system_path):
    with pytest.raises(InvalidIndexConfigError,
                       match="refresh mode 'fast' is not supported; use one of full, incremental, quick"):
        Hyperspace(spark).refreshIndex("idx", mode="fast")
