"""The star-schema benchmark's data (``python -m bench star``): a date-clustered fact table and
four dimensions, generated with ``spark.range`` and deterministic expressions (Murmur3
``hash`` of the row id and a salt per column), written once as Parquet under the data
directory and reused.

- ``store_sales`` (the fact): 10 million rows per unit of scale, in :func:`fact_files` files
  written in date order (file ``i`` holds about ``1/files`` of the five years 1998-2002): date,
  item, customer (4% null) and store keys, a ticket number (8 lines per ticket, increasing),
  quantity, sales price and net profit (``decimal(7,2)``: exact sums, so answers compare equal).
- ``date_dim``: one row per day of 1997-2003 (the fact's five years and one on each side),
  keys from :data:`FIRST_DATE_SK` (1997-01-01), year, month, day, quarter, day of week, week.
- ``item`` (18,000 per unit of scale, at least 1,000): category (10), class, brand (100),
  price, manufacturer; ``customer`` (100,000 per unit, at least 5,000): birth year, state
  (20), preferred flag, segment; ``store`` (50): state, city, market.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from bench.datasets import DONE

log = logging.getLogger("bench.star_data")

#: bump when the generated data changes: a cached copy of another version is generated again
VERSION = 1
FIRST_DATE_SK = 2_450_000            # 1997-01-01
DIMENSION_DAYS = 2557                # 1997-01-01 .. 2003-12-31
FACT_FIRST_DAY = 365                 # 1998-01-01, as days after 1997-01-01
FACT_DAYS = 1826                     # 1998-01-01 .. 2002-12-31
FACT_YEARS = (1998, 1999, 2000, 2001, 2002)
STORES = 50
CATEGORIES = ("Books", "Children", "Electronics", "Home", "Jewelry", "Men", "Music", "Shoes",
              "Sports", "Women")
STATES = ("AL", "CA", "CO", "FL", "GA", "IA", "IL", "IN", "KS", "KY", "MI", "MN", "MO", "NC",
          "NY", "OH", "PA", "TN", "TX", "WA")
SEGMENTS = ("consumer", "corporate", "home office", "small business", "student")
TABLES = ("store_sales", "date_dim", "item", "customer", "store")


def fact_rows(scale: float) -> int:
    """Rows of the fact table: 10 million per unit of scale, at least 100,000."""
    return max(100_000, int(10_000_000 * scale))


def fact_files(scale: float) -> int:
    """Files of the fact table: 120 from scale 1 (about 15 days each), 48 below."""
    return 120 if scale >= 1 else 48


def _pick(values: tuple[str, ...], salt: int) -> str:
    """SQL choosing one of ``values`` by the row id's hash."""
    listed = ", ".join(f"'{v}'" for v in values)
    return f"element_at(array({listed}), cast(pmod(hash(id, {salt}), {len(values)}) + 1 as int))"


def _write(df: Any, path: Path, files: int = 1) -> None:
    df.coalesce(files).write.mode("overwrite").parquet(str(path))


def _generate(spark: Any, out: Path, scale: float) -> dict[str, Any]:
    rows, files = fact_rows(scale), fact_files(scale)
    items, customers = max(1_000, int(18_000 * scale)), max(5_000, int(100_000 * scale))
    _write(spark.range(0, DIMENSION_DAYS, 1, 1).selectExpr(
        f"cast({FIRST_DATE_SK} + id as int) AS d_date_sk",
        "date_add(DATE'1997-01-01', cast(id as int)) AS d_date").selectExpr(
        "d_date_sk", "d_date", "year(d_date) AS d_year", "month(d_date) AS d_moy",
        "dayofmonth(d_date) AS d_dom", "quarter(d_date) AS d_qoy",
        "dayofweek(d_date) - 1 AS d_dow", f"cast((d_date_sk - {FIRST_DATE_SK}) div 7 + 1 as int)"
        " AS d_week_seq"), out / "date_dim")
    _write(spark.range(0, items, 1, 1).selectExpr(
        "cast(id + 1 as int) AS i_item_sk", f"{_pick(CATEGORIES, 11)} AS i_category",
        "cast(pmod(hash(id, 12), 8) + 1 as int) AS i_class_id",
        "concat('brand#', pmod(hash(id, 13), 100)) AS i_brand",
        "cast(pmod(hash(id, 14), 10000) / 100.0 + 0.99 as decimal(7,2)) AS i_current_price",
        "cast(pmod(hash(id, 15), 1000) as int) AS i_manufact_id"), out / "item")
    _write(spark.range(0, customers, 1, 1).selectExpr(
        "cast(id + 1 as int) AS c_customer_sk",
        "cast(1930 + pmod(hash(id, 21), 70) as int) AS c_birth_year",
        f"{_pick(STATES, 22)} AS c_state",
        "if(pmod(hash(id, 23), 3) = 0, 'Y', 'N') AS c_preferred_cust_flag",
        f"{_pick(SEGMENTS, 24)} AS c_segment"), out / "customer")
    _write(spark.range(0, STORES, 1, 1).selectExpr(
        "cast(id + 1 as int) AS s_store_sk", f"{_pick(STATES, 31)} AS s_state",
        "concat('city-', pmod(hash(id, 32), 25)) AS s_city",
        "cast(pmod(id, 10) + 1 as int) AS s_market_id",
        "cast(5000 + pmod(hash(id, 33), 5000) as int) AS s_floor_space"), out / "store")
    # contiguous id ranges per partition, one file each: the files follow the dates
    fact = spark.range(0, rows, 1, files).selectExpr(
        f"cast({FIRST_DATE_SK + FACT_FIRST_DAY} + id * {FACT_DAYS} div {rows} as int)"
        " AS ss_sold_date_sk",
        f"cast(pmod(hash(id, 1), {items}) + 1 as int) AS ss_item_sk",
        f"if(pmod(hash(id, 2), 25) = 0, null, cast(pmod(hash(id, 3), {customers}) + 1 as int))"
        " AS ss_customer_sk",
        f"cast(pmod(hash(id, 4), {STORES}) + 1 as int) AS ss_store_sk",
        "id div 8 + 1 AS ss_ticket_number",
        "cast(pmod(hash(id, 5), 100) + 1 as int) AS ss_quantity",
        "cast(pmod(hash(id, 6), 20000) / 100.0 as decimal(7,2)) AS ss_sales_price",
        "cast((pmod(hash(id, 7), 40000) - 10000) / 100.0 as decimal(7,2)) AS ss_net_profit")
    fact.write.mode("overwrite").parquet(str(out / "store_sales"))
    sizes = [f.stat().st_size for f in (out / "store_sales").glob("*.parquet")]
    return {"version": VERSION, "scale": scale, "fact_rows": rows, "fact_files": len(sizes),
            "fact_bytes": sum(sizes), "items": items, "customers": customers,
            "stores": STORES, "paths": {t: str(out / t) for t in TABLES}}


def star_schema(spark: Any, data_dir: str, scale: float) -> dict[str, Any]:
    """The star schema at ``scale``, generated once (again when :data:`VERSION` changed): its
    facts, ``paths`` per table among them."""
    out = Path(data_dir) / f"star-sf{scale:g}"
    done = out / DONE
    if not done.exists() or json.loads(done.read_text()).get("version") != VERSION:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        log.info("generating the star schema (%d fact rows, %d files) into %s",
                 fact_rows(scale), fact_files(scale), out)
        done.write_text(json.dumps(_generate(spark, out, scale)))
    return json.loads(done.read_text())
