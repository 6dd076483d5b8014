"""The JVM options of every Spark driver the tests start: the quick JIT alone, and a
class-data-sharing archive of the classes a Spark session loads, made once per Spark install
and Java.

A test's Spark work is short and cold: plans and generated code seen once, jobs over a few KB.
On a slow 2-core machine a new driver took 8 s to start and 13 s to its first aggregation, most
of it loading and verifying about 15,000 classes of Spark's jars and compiling them with both
JITs on both cores. With the quick JIT alone (``-XX:TieredStopAtLevel=1``) and those classes
mapped from an archive made at the first run (``-XX:SharedArchiveFile``, Java's AppCDS), the
same driver reached its first aggregation in 6 s. Measured on the tests (the same files, one
after the other, alone): the crash and command-line files (a dozen drivers in processes of
their own) 281 s as they were, 267 s with the quick JIT, 239 s with the archive, 201 s with
both; four files of queries in the session's own driver 389 s, 343 s with both (the archive
alone changed nothing there). Neither changes what any class does.

:func:`spark_submit_opts` makes the archive (one training run of :func:`main` under
``-XX:ArchiveClassesAtExit``, under a minute) into ``<accelerator cache>/class-archives/<key>``,
keyed by the Java the launcher runs and the jars and path of the Spark install, so another
pyspark or Java never meets an archive it cannot map; the options it returns go into
``SPARK_SUBMIT_OPTS``, which ``spark-submit`` adds to every driver JVM it starts. Without an
archive (its training failed, said on standard error) the drivers load their classes as
before.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from accelerator.runtime.jvm import cache_dir, spark_jars_dir
from indexes.errors import JvmSetupError
from tests.services.hdfs import jdk_tool
from tests.services.maven import materialize

ARCHIVE = "spark.jsa"
TRAINING_TIMEOUT_S = 300
#: the JIT of every driver: the quick one alone
QUICK_JIT = "-XX:TieredStopAtLevel=1"
#: the JVM's own log lines about archives (a mapping refused) kept out of the tests' output
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_key() -> str:
    """What an archive is valid for: the java (its path and version) and Spark's jars (their
    directory, names, sizes and times), hashed."""
    java = jdk_tool("java")
    version = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    jars = spark_jars_dir()
    listing = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(jars.glob("*.jar"))]
    text = repr((os.path.realpath(java), version, str(jars.resolve()), listing))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _train(out: Path) -> None:
    """Runs :func:`main` in a new process whose driver writes the classes it loaded into
    ``out/spark.jsa`` as it exits."""
    out.mkdir()
    env = dict(os.environ,
               SPARK_SUBMIT_OPTS=f"{QUICK_JIT} -XX:ArchiveClassesAtExit={out / ARCHIVE}",
               PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable))
    done = subprocess.run([sys.executable, "-m", "tests.services.driver_jvm", str(out)],
                          env=env, capture_output=True, text=True, timeout=TRAINING_TIMEOUT_S,
                          cwd=Path(__file__).resolve().parents[2])
    shutil.rmtree(out / "work", ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"the training run failed:\n{done.stderr[-3000:]}")
    if not (out / ARCHIVE).is_file() or (out / ARCHIVE).stat().st_size == 0:
        raise RuntimeError("the training JVM wrote no archive")


def spark_submit_opts() -> str:
    """The drivers' JVM options: the quick JIT, and this Spark install's archive (made first
    when missing; left out, with the reason on standard error, when it cannot be made)."""
    try:
        target = materialize(cache_dir() / "class-archives" / archive_key(), _train)
    except (OSError, RuntimeError, subprocess.SubprocessError, JvmSetupError) as e:
        print(f"tests: no class archive for the JVMs ({e}); they load Spark's classes one by one",
              file=sys.stderr)
        return QUICK_JIT
    return f"{QUICK_JIT} -XX:SharedArchiveFile={target / ARCHIVE} {QUIET}"


def main(out: str) -> None:
    """The training run: a session doing what the tests do most (Parquet, JSON and CSV written
    and read, filters, aggregates, joins, windows, SQL, Python workers, the accelerator's
    rewrite over a covering and a data-skipping index), under ``out``; returns once the driver
    JVM has exited."""
    from pyspark.sql import SparkSession

    from accelerator import DataSkippingIndexConfig, Hyperspace, IndexConfig, MinMaxSketch

    work = Path(out) / "work"
    spark = (SparkSession.builder.master("local[2]").appName("class-archive")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.accelerator.history.enabled", "false")
             .config("spark.sql.warehouse.dir", str(work / "warehouse"))
             .config("spark.accelerator.system.path", str(work / "indexes")).getOrCreate())
    df = spark.range(0, 2000, numPartitions=4).selectExpr(
        "id", "CAST(id % 13 AS INT) AS k", "concat('n', id % 97) AS name",
        "named_struct('a', id, 'b', array(id, id + 1)) AS nested")
    for fmt in ("parquet", "json", "csv"):
        frame = df.drop("nested") if fmt == "csv" else df
        frame.write.mode("overwrite").option("header", "true").format(fmt).save(str(work / fmt))
    src = spark.read.parquet(str(work / "parquet"))
    hs = Hyperspace(spark)
    hs.createIndex(src, IndexConfig("cover", ["k"], ["name"]))
    hs.createIndex(src, DataSkippingIndexConfig("skip", MinMaxSketch("id")))
    Hyperspace.enable(spark)
    src.createOrReplaceTempView("t")
    src.filter("k = 3").select("k", "name").collect()
    src.filter("id BETWEEN 10 AND 20").collect()
    spark.sql("WITH a AS (SELECT k, count(*) AS n FROM t GROUP BY k) SELECT t.name, a.n, "
              "rank() OVER (PARTITION BY t.k ORDER BY t.id) AS r FROM t JOIN a ON t.k = a.k "
              "WHERE t.id < 100").collect()
    spark.read.option("header", "true").csv(str(work / "csv")).groupBy("k").count().collect()
    spark.read.json(str(work / "json")).select("nested.a").distinct().collect()
    spark.createDataFrame([(1, "a")], "x INT, y STRING").rdd.map(lambda r: r.x).collect()
    hs.indexes().collect()
    Hyperspace.disable(spark)
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    jvm.stdin.close()   # the driver JVM exits at the end of its input, writing the archive
    jvm.wait(TRAINING_TIMEOUT_S)


if __name__ == "__main__":
    main(sys.argv[1])
