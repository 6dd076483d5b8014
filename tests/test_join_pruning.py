"""Dynamic file pruning end to end: a fact table clustered by date key (a file per ten days,
one file of null keys) with a MinMax index on its key, joined with a filtered date dimension,
reads only the files that may hold the dimension's keys, with results equal to vanilla Spark
in ANSI mode on and off; outer joins never prune their preserved side; an empty dimension
prunes every file of an inner join; one too large to collect prunes nothing, and says so; a
relation its own filter already prunes below ``minScanBytes`` collects nothing; the keys are
collected once per other side while its files are unchanged."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from accelerator import DataSkippingIndexConfig, MinMaxSketch
from tests.helpers import bag, own_copy, row_groups_of, session_conf, vanilla

FILES = 10           # fact files of keys 10i .. 10i+9; one more holds only null keys


@pytest.fixture(autouse=True)
def small_facts_prune(spark):
    """The facts here are a few KB: below the default minScanBytes they would never be
    pruned through their joins (its own test sets it)."""
    with session_conf(spark, spark__accelerator__dynamicFilePruning__minScanBytes="0"):
        yield


@pytest.fixture(scope="module")
def star_written(spark, tmp_path_factory):
    """The star's files, written by Spark once for the module (see ``star``)."""
    base = tmp_path_factory.mktemp("star")
    fact, dim = str(base / "sales"), str(base / "dates")
    for i in range(FILES):
        part = [(10 * i + j % 10, float(j)) for j in range(20)]
        spark.createDataFrame(part, "ss_sold_date_sk int, amt double").coalesce(1) \
            .write.mode("append").parquet(fact)
    spark.createDataFrame([(None, 1.0), (None, 2.0)], "ss_sold_date_sk int, amt double") \
        .coalesce(1).write.mode("append").parquet(fact)
    spark.createDataFrame([(k, 2000 + k // 50, k // 10) for k in range(100)] + [(None, 2000, 3)],
                          "d_date_sk int, d_year int, d_moy int") \
        .coalesce(1).write.parquet(dim)
    return base


@pytest.fixture
def star(star_written, tmp_path):
    """(fact path, dimension path), a test's own copy: 10 date-clustered fact files and one of
    null keys; the date dimension's keys 0..99, month d_moy = key // 10, year 2000 + key // 50."""
    fact, dim = own_copy(star_written, tmp_path, "sales", "dates")
    return fact, dim


def indexed(spark, hs, fact):
    hs.createIndex(spark.read.parquet(fact),
                   DataSkippingIndexConfig("ds_sales", MinMaxSketch("ss_sold_date_sk")))


def fact_files(df, fact) -> int:
    return sum(1 for f in df.inputFiles() if "/sales/" in f)


def check(spark, build, fact, files: int):
    """``build()``'s rows equal vanilla Spark's, reading ``files`` of the fact's files."""
    df = build()
    assert bag(df) == vanilla(spark, build, of=bag)
    assert fact_files(df, fact) == files


def joined(spark, fact, dim, where: str, how: str = "inner"):
    s, d = spark.read.parquet(fact), spark.read.parquet(dim)
    return s.join(d.where(where), s.ss_sold_date_sk == d.d_date_sk, how)


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_a_filtered_dimension_prunes_the_fact_files(spark, hs, star, ansi):
    fact, dim = star
    with session_conf(spark, spark__sql__ansi__enabled=ansi):
        indexed(spark, hs, fact)
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, 1)
        check(spark, lambda: joined(spark, fact, dim, "d_year = 2001 and d_moy = 7"), fact, 1)
        check(spark, lambda: joined(spark, fact, dim, "d_year = 2001"), fact, 5)
        check(spark, lambda: joined(spark, fact, dim, "d_moy in (0, 7)"), fact, 2)
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3")
              .groupBy("d_moy").agg(F.sum("amt")), fact, 1)
        # the join key of another type: the dimension's cast to the fact's
        wide = spark.read.parquet(fact).withColumn("ss_sold_date_sk",
                                                   F.col("ss_sold_date_sk").cast("long"))
        check(spark, lambda: wide.join(spark.read.parquet(dim).where("d_moy = 3"),
                                       F.col("ss_sold_date_sk") == F.col("d_date_sk")), fact, 1)


def test_explain_and_whynot_name_the_join(spark, hs, star):
    fact, dim = star
    indexed(spark, hs, fact)
    df = joined(spark, fact, dim, "d_moy = 3")
    text = hs.explain(df, verbose=True, redirectFunc=lambda s: None)
    assert "1 of 11 files kept" in text, text
    assert ("files the Inner join on ss_sold_date_sk = d_date_sk (the other side holds 10 "
            "distinct keys) alone skips: 10") in text, text


def test_an_empty_dimension_side_prunes_every_file_of_an_inner_join(spark, hs, star):
    fact, dim = star
    indexed(spark, hs, fact)
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 99"), fact, 0)
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 99", "left_semi"), fact, 0)
    # the preserved side of an outer join is read whole even so
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 99", "left"), fact, FILES + 1)


def test_a_dimension_too_large_to_collect_prunes_nothing(spark, hs, star):
    fact, dim = star
    indexed(spark, hs, fact)
    with session_conf(spark, spark__accelerator__dynamicFilePruning__maxSideBytes="10"):
        # the Filter isnotnull(key) Spark infers still skips the file of null keys
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, FILES)
        text = hs.explain(joined(spark, fact, dim, "d_moy = 3"), redirectFunc=lambda s: None)
        assert ("Inner join on ss_sold_date_sk = d_date_sk not used: the other side is "
                "estimated at") in text, text
    with session_conf(spark, spark__sql__autoBroadcastJoinThreshold="-1"):
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, FILES)
    with session_conf(spark, spark__accelerator__dynamicFilePruning__enabled="false"):
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, FILES)


def test_without_constraint_propagation_the_join_still_prunes(spark, hs, star):
    """No isnotnull(key) Filter is inferred above the fact: the join alone sends its plan to
    the rewriter."""
    fact, dim = star
    indexed(spark, hs, fact)
    with session_conf(spark, spark__sql__constraintPropagation__enabled="false"):
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, 1)
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3", "left_semi"), fact, 1)


#: per key type, the key of the row of second ``{}`` (increasing with it)
TYPED_KEYS = {"timestamp": "cast(timestamp_seconds({}) as timestamp)",
              "timestamp_ntz": "cast(timestamp_seconds({}) as timestamp_ntz)",
              "decimal(12,2)": "cast({} as decimal(12,2))",
              "string": "lpad(cast({} as string), 8, '0')",
              "date": "date_from_unix_date(cast({} div 3600 as int))"}


@pytest.mark.parametrize("key_type", TYPED_KEYS)
def test_keys_of_every_type_prune_in_any_time_zone(spark, hs, tmp_path, key_type):
    """A fact keyed by timestamps (decimals, strings, dates), a file per day, joined with a
    dimension of one day's keys: one file read, in a session time zone far from UTC (the keys'
    query reads timestamps as microseconds, never as local times)."""
    fact, dim = str(tmp_path / "ts_fact"), str(tmp_path / "ts_dim")
    as_key = TYPED_KEYS[key_type].format
    with session_conf(spark, spark__sql__session__timeZone="America/Los_Angeles"):
        for day in range(6):
            spark.range(day * 86400, day * 86400 + 86400, 3600, 1).selectExpr(
                f"{as_key('id')} AS k", "id AS amt").write.mode("append").parquet(fact)
        spark.range(3 * 86400, 4 * 86400, 3600, 1).selectExpr(
            f"{as_key('id')} AS d_k", "cast(id div 86400 as int) AS d_day") \
            .write.parquet(dim)
        hs.createIndex(spark.read.parquet(fact),
                       DataSkippingIndexConfig(f"ds_{key_type[:4]}", MinMaxSketch("k")))

        def build():
            s, d = spark.read.parquet(fact), spark.read.parquet(dim).where("d_day = 3")
            return s.join(d, s.k == d.d_k)
        assert bag(build()) == vanilla(spark, build, of=bag)
        assert sum(1 for f in build().inputFiles() if "/ts_fact/" in f) == 1


def test_an_uncorrelated_in_subquery_on_the_fact_does_not_stop_the_join_pruning(spark, hs,
                                                                                  star):
    """Spark rewrites ``amt IN (SELECT ...)`` into a semi join only after the accelerator's
    rule ran: until then it is a Filter right above the fact, which never raises."""
    fact, dim = star
    indexed(spark, hs, fact)
    spark.read.parquet(fact).createOrReplaceTempView("dfp_sales")
    spark.read.parquet(dim).createOrReplaceTempView("dfp_dates")
    spark.createDataFrame([(1.0,), (3.0,)], "a double").createOrReplaceTempView("dfp_amounts")
    sql = ("SELECT d_moy, sum(amt) FROM dfp_sales JOIN dfp_dates ON ss_sold_date_sk = d_date_sk "
           "WHERE d_moy = 3 AND amt IN (SELECT a FROM dfp_amounts) GROUP BY d_moy")
    check(spark, lambda: spark.sql(sql), fact, 1)


def collections(spark) -> int:
    """The other-side queries dynamic file pruning ran so far in this driver."""
    from accelerator.query import session
    return session.rewriter(spark).join_sides.collected


def test_a_relation_its_own_filter_prunes_below_min_scan_bytes_collects_nothing(spark, hs,
                                                                                  star):
    fact, dim = star
    indexed(spark, hs, fact)

    def own():     # the fact's own filter keeps one file; the dimension's month would too
        return joined(spark, fact, dim, "d_moy = 3").where("ss_sold_date_sk = 31")
    with session_conf(spark, spark__accelerator__dynamicFilePruning__minScanBytes="1m"):
        before = collections(spark)
        check(spark, own, fact, 1)
        assert collections(spark) == before
        text = hs.explain(own(), redirectFunc=lambda s: None)
        assert "after its own filters, under spark.accelerator.dynamicFilePruning." \
               "minScanBytes (1048576)" in text, text
        # unfiltered, the whole fact is under 1 MB too: read whole, nothing collected
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, FILES)
        assert collections(spark) == before
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, 1)
    assert collections(spark) > before


def test_the_keys_of_an_unchanged_other_side_are_collected_once(spark, hs, star, tmp_path):
    fact, dim = star
    indexed(spark, hs, fact)
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 4"), fact, 1)
    before = collections(spark)
    # planned again (new DataFrames, new attribute ids), and explained
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 4"), fact, 1)
    hs.explain(joined(spark, fact, dim, "d_moy = 4"), redirectFunc=lambda s: None)
    assert collections(spark) == before
    # a union of two such joins reading one column (the side projects its key alone): the
    # same keys, nothing collected
    twice = lambda: joined(spark, fact, dim, "d_moy = 4").select("amt").union(  # noqa: E731
        joined(spark, fact, dim, "d_moy = 4").select("amt"))
    check(spark, twice, fact, 1)
    assert collections(spark) == before
    # another month is another side; a changed dimension file is another source version
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 5"), fact, 1)
    assert collections(spark) == before + 1
    # a CTE read twice (one reading's attributes qualified by its alias): once for both
    spark.read.parquet(fact).createOrReplaceTempView("dfp_cte_sales")
    spark.read.parquet(dim).createOrReplaceTempView("dfp_cte_dates")
    cte = ("WITH m AS (SELECT d_year, sum(amt) AS s FROM dfp_cte_sales JOIN dfp_cte_dates "
           "ON ss_sold_date_sk = d_date_sk WHERE d_moy = 6 AND d_year IN (2000, 2001) "
           "GROUP BY d_year) SELECT a.s, b.s FROM m a JOIN m b ON b.d_year = a.d_year + 1")
    check(spark, lambda: spark.sql(cte), fact, 1)
    assert collections(spark) == before + 2
    spark.createDataFrame([(55, 2001, 4)], "d_date_sk int, d_year int, d_moy int") \
        .coalesce(1).write.mode("append").parquet(dim)
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 4"), fact, 2)
    assert collections(spark) == before + 3


def test_past_max_keys_the_range_of_keys_prunes(spark, hs, star):
    fact, dim = star
    indexed(spark, hs, fact)
    with session_conf(spark, spark__accelerator__dynamicFilePruning__maxKeys="3"):
        check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, 1)
        check(spark, lambda: joined(spark, fact, dim, "d_moy in (0, 7)"), fact, 8)


@pytest.mark.parametrize("how,fact_files_read", [
    ("left", FILES + 1),        # the fact is preserved: never pruned
    ("full", FILES + 1),
    ("left_anti", FILES + 1),
    ("left_semi", 1),
    ("right", 1),               # the dimension is preserved, the fact is not
])
def test_outer_joins_never_prune_their_preserved_side(spark, hs, star, how, fact_files_read):
    fact, dim = star
    indexed(spark, hs, fact)
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 3", how), fact, fact_files_read)


def test_the_fact_on_the_right_of_a_left_join_is_pruned(spark, hs, star):
    fact, dim = star
    indexed(spark, hs, fact)

    def build():
        s, d = spark.read.parquet(fact), spark.read.parquet(dim).where("d_moy = 3")
        return d.join(s, s.ss_sold_date_sk == d.d_date_sk, "left")
    check(spark, build, fact, 1)


def test_null_keys_on_either_side_never_match(spark, hs, star):
    fact, dim = star
    indexed(spark, hs, fact)

    def build():      # the dimension's side holds a null key; the fact has a file of them
        s, d = spark.read.parquet(fact), spark.read.parquet(dim).where("d_moy = 3")
        return d.join(s, s.ss_sold_date_sk == d.d_date_sk, "left").where("amt is null")
    check(spark, build, fact, 1)


def test_row_groups_of_a_kept_file_are_pruned_by_the_join(spark, hs, tmp_path):
    fact, dim = str(tmp_path / "one_file"), str(tmp_path / "dates")
    spark.range(0, 1000, 1, 1).selectExpr("cast(id as int) as ss_sold_date_sk", "id as amt") \
        .write.options(**row_groups_of(100)).parquet(fact)
    spark.createDataFrame([(k, k // 100) for k in range(1000)], "d_date_sk int, d_moy int") \
        .coalesce(1).write.parquet(dim)
    hs.createIndex(spark.read.parquet(fact),
                   DataSkippingIndexConfig("ds_one", MinMaxSketch("ss_sold_date_sk")))

    def build():
        s, d = spark.read.parquet(fact), spark.read.parquet(dim).where("d_moy = 4")
        return s.join(d, s.ss_sold_date_sk == d.d_date_sk)
    with session_conf(spark, spark__sql__parquet__filterPushdown="false"):
        assert bag(build()) == vanilla(spark, build, of=bag)
        plan = build()._jdf.queryExecution().executedPlan().toString()
        assert "row groups selected in 1 files" in plan, plan
        assert "1 row groups read in 1 files" in hs.explain(build(), redirectFunc=lambda _: None)


def test_the_engine_proposes_the_sketch_from_recorded_star_joins(spark, hs, star):
    """Star joins recorded on the date-clustered fact: recommend() proposes a min/max sketch
    on its key, applyRecommendations() builds it, and the next runs read fewer fact files."""
    fact, dim = star
    months = ("d_moy = 3", "d_moy = 7", "d_year = 2001 and d_moy = 8")

    def build(where: str):
        return joined(spark, fact, dim, where).groupBy("d_moy").agg(F.sum("amt").alias("total"))
    for where in months:
        assert fact_files(build(where), fact) == FILES + 1   # no index yet: every file
        build(where).collect()
    found = [r for r in hs.recommend().collect() if r["kind"] == "minmax"]
    assert [(r["action"], r["source"].rstrip("/").endswith("/sales"), r["columns"])
            for r in found] == [("create", True, ["ss_sold_date_sk"])], found
    assert "filtered on d_moy" in found[0]["reason"] and "100%" not in found[0]["reason"]
    applied = hs.applyRecommendations().collect()
    assert ("create", "minmax", "applied") in {(r["action"], r["kind"], r["status"])
                                                for r in applied}, applied
    for where in months:
        check(spark, lambda: build(where), fact, 1)


def planning_jobs(spark, build) -> int:
    """The Spark jobs optimizing ``build()`` ran (the keys' queries of its joins among them;
    not the schema inference of its reads)."""
    def jobs():
        # the scheduler's job counter: the status store keeps only the last
        # spark.ui.retainedJobs jobs, so its size shrinks once a process ran that many
        return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())
    df = build()
    before = jobs()
    df._jdf.queryExecution().optimizedPlan()
    return jobs() - before


def copies(spark) -> int:
    """The copies of small relations dynamic file pruning made so far in this driver."""
    from accelerator.query import session
    return session.rewriter(spark).join_sides.copies.made


def test_a_small_dimension_is_copied_once_and_its_sides_cost_no_spark_job(spark, hs, star):
    """The date dimension's columns are copied into driver memory by one job; then every
    filter of it (an OR, an IN list, a cast key, its null key) is evaluated by Spark's
    optimizer over the copy while planning: no job, the same files and answers."""
    fact, dim = star
    indexed(spark, hs, fact)
    made = copies(spark)
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, 1)
    assert copies(spark) == made + 1
    wide = spark.read.parquet(fact).withColumn("ss_sold_date_sk",
                                               F.col("ss_sold_date_sk").cast("long"))
    for build, files in [
            (lambda: joined(spark, fact, dim, "d_moy = 4"), 1),
            (lambda: joined(spark, fact, dim, "d_moy = 5 or d_year = 2001"), 5),
            (lambda: joined(spark, fact, dim, "d_moy in (1, 2)"), 2),
            (lambda: joined(spark, fact, dim, "d_moy = 3", "left_semi"), 1),
            (lambda: wide.join(spark.read.parquet(dim).where("d_moy = 6"),
                               F.col("ss_sold_date_sk") == F.col("d_date_sk")), 1)]:
        assert planning_jobs(spark, build) == 0
        check(spark, build, fact, files)
    assert copies(spark) == made + 1
    # a changed dimension file is another source version: copied again
    spark.createDataFrame([(55, 2001, 4)], "d_date_sk int, d_year int, d_moy int") \
        .coalesce(1).write.mode("append").parquet(dim)
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 4"), fact, 2)
    assert copies(spark) == made + 2


@pytest.mark.parametrize("conf", [
    {"spark__accelerator__dynamicFilePruning__localBytes": "0"},       # copies off
    {"spark__accelerator__dynamicFilePruning__localBytes": "100"},     # the dimension is larger
    # the optimizer cannot fold the side into local rows: its query runs over the copy
    {"spark__sql__optimizer__excludedRules":
     "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation"}])
def test_a_side_not_evaluated_over_a_copy_runs_its_query(spark, hs, star, conf):
    fact, dim = star
    indexed(spark, hs, fact)
    check(spark, lambda: joined(spark, fact, dim, "d_moy = 3"), fact, 1)    # copied
    with session_conf(spark, **conf):
        build = lambda: joined(spark, fact, dim, "d_moy = 7 or d_moy = 8")  # noqa: E731
        assert planning_jobs(spark, build) == 1
        check(spark, build, fact, 2)
