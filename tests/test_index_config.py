"""Validation of covering index configurations: every invalid input gets a clear message."""
from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType, IntegerType, MapType, StringType, StructField, StructType,
)

from accelerator import (
    BloomFilterSketch, CoveringIndexConfig, DataSkippingIndexConfig, Hyperspace, IndexConfig,
    InvalidIndexConfigError, MinMaxSketch, TextIndexConfig, UnsupportedSourceError,
    ValueListSketch,
)
from indexes.names import MAX_INDEX_NAME_LENGTH, validate_index_name

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


def test_index_names_are_at_most_128_characters():
    assert MAX_INDEX_NAME_LENGTH == 128
    longest = "i" * 128
    assert validate_index_name(longest) == longest
    assert CoveringIndexConfig(longest, ["id"]).indexName == longest
    with pytest.raises(InvalidIndexConfigError) as info:
        validate_index_name("i" * 129)
    assert str(info.value) == ("invalid index name 'iiiiiiiiiiiiiiiiiiii...': it is 129 characters "
                               "long; index names have at most 128")
    for make in (lambda n: CoveringIndexConfig(n, ["id"]),
                 lambda n: DataSkippingIndexConfig(n, MinMaxSketch("id")),
                 lambda n: TextIndexConfig(n, "name")):
        with pytest.raises(InvalidIndexConfigError, match="it is 300 characters long"):
            make("x" * 300)


@pytest.mark.parametrize("make, message", [
    (lambda: CoveringIndexConfig(123, ["id"]), r"invalid index name 123: use only letters"),
    (lambda: CoveringIndexConfig(None, ["id"]), r"invalid index name None"),
    (lambda: CoveringIndexConfig("idx", "id"),
     r"^index 'idx': indexedColumns must be a list of column names, got 'id'; write \['id'\]$"),
    (lambda: CoveringIndexConfig("idx", ["id"], "name"),
     r"includedColumns must be a list of column names, got 'name'; write \['name'\]"),
    (lambda: CoveringIndexConfig("idx", 5), r"indexedColumns must be a list of column names, got 5$"),
    (lambda: CoveringIndexConfig("idx", None), r"indexedColumns is empty"),
    (lambda: CoveringIndexConfig("idx", ["id", 7]),
     r"^index 'idx': column names must be strings, got 7 in indexedColumns$"),
    (lambda: CoveringIndexConfig("idx", ["id"], [None]), r"got None in includedColumns"),
    (lambda: CoveringIndexConfig("idx", ["a..b"]), r"^index 'idx': invalid column name 'a\.\.b'$"),
    (lambda: CoveringIndexConfig("idx", ["id"], [""]), r"invalid column name ''"),
    (lambda: CoveringIndexConfig("idx", ["`a.b"]), r"^index 'idx': unbalanced backtick in column"),
    (lambda: CoveringIndexConfig("idx", ["id"], numBuckets=0), r"numBuckets must be a positive integer, got 0"),
    (lambda: CoveringIndexConfig("idx", ["id"], numBuckets="4"), r"got '4'"),
    (lambda: CoveringIndexConfig("idx", ["id"], numBuckets=True), r"got True"),
    (lambda: DataSkippingIndexConfig("bad name!", MinMaxSketch("id")), r"invalid index name 'bad name!'"),
    (lambda: DataSkippingIndexConfig("ds"), r"^index 'ds': no sketches"),
    (lambda: DataSkippingIndexConfig("ds", []), r"no sketches"),
    (lambda: DataSkippingIndexConfig("ds", "id"), r"^index 'ds': 'id' is not a sketch"),
    (lambda: DataSkippingIndexConfig("ds", [MinMaxSketch("id"), 3]), r"3 is not a sketch"),
    (lambda: DataSkippingIndexConfig("ds", MinMaxSketch(5)), r"the expression must be a non-empty string"),
    (lambda: DataSkippingIndexConfig("ds", MinMaxSketch("  ")), r"non-empty string"),
    (lambda: DataSkippingIndexConfig("ds", BloomFilterSketch("id", fpp=0)), r"fpp must be between 0 and 1"),
    (lambda: DataSkippingIndexConfig("ds", BloomFilterSketch("id", expectedDistinctCountPerFile=True)),
     r"expectedDistinctCountPerFile must be a positive integer"),
    (lambda: DataSkippingIndexConfig("ds", ValueListSketch("id", maxValues=10_001)),
     r"maxValues must be an integer from 1 to 10000"),
    (lambda: TextIndexConfig(None, "message"), r"invalid index name None"),
    (lambda: TextIndexConfig("_t", "message"), r"invalid index name '_t'"),
    (lambda: TextIndexConfig("t", 5), r"^index 't': column must be a non-empty string"),
    (lambda: TextIndexConfig("t", " "), r"column must be a non-empty string"),
])
def test_configs_are_validated_at_construction(make, message):
    with pytest.raises(InvalidIndexConfigError, match=message):
        make()


def test_valid_configs_construct():
    config = CoveringIndexConfig("idx", ("id",), None, numBuckets=3)
    assert (config.indexedColumns, config.includedColumns) == (["id"], [])
    assert DataSkippingIndexConfig("ds", [MinMaxSketch("id")]).sketches == (MinMaxSketch("id"),)
    assert TextIndexConfig("t", column="mail.body").column == "mail.body"


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
