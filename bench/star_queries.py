"""The star-schema benchmark's query templates: decision-support SQL over the views
``store_sales``, ``date_dim``, ``item``, ``customer`` and ``store`` (bench/star_data.py), each
given its literals by a seeded generator, so the same seed gives the same queries. They
filter the fact through its dimensions (a month, a quarter, a week, a day, a year), join it
with several, and use CTE self-joins, correlated subqueries, IN/EXISTS, window functions,
rollups and unions. Every ordering that a LIMIT or a rank depends on is total, and the
measures are decimals, so that answers compare exactly."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from bench.star_data import CATEGORIES, FACT_YEARS, FIRST_DATE_SK, STATES

#: the joins of the fact with each dimension
_DATES = "JOIN date_dim ON ss_sold_date_sk = d_date_sk"
_ITEMS = "JOIN item ON ss_item_sk = i_item_sk"
_CUSTOMERS = "JOIN customer ON ss_customer_sk = c_customer_sk"
_STORES = "JOIN store ON ss_store_sk = s_store_sk"


@dataclass(frozen=True)
class Template:
    """A query kind: ``make(rng, facts)`` gives one query's SQL; ``shapes`` name what it
    exercises (for the report)."""

    name: str
    shapes: tuple[str, ...]
    make: Callable[[random.Random, dict], str]


def _month(rng: random.Random) -> tuple[int, int]:
    return rng.choice(FACT_YEARS), rng.randint(1, 12)


def month_by_category(rng: random.Random, facts: dict) -> str:
    """The one-month dimension filter (the fact bytes it reads are reported)."""
    year, month = _month(rng)
    return (f"SELECT i_category, sum(ss_sales_price * ss_quantity) AS revenue, count(*) AS n "
            f"FROM store_sales {_DATES} {_ITEMS} WHERE d_year = {year} AND d_moy = {month} "
            f"GROUP BY i_category")


def _q(sql: str) -> Callable[[random.Random, dict], str]:
    """A template whose literals are a year ``{y}``, a month ``{m}``, a quarter ``{q}``, a
    category ``{c}``, a state ``{s}``, a brand ``{b}``, a week ``{w}``, a date key ``{k}``, a
    ticket ``{t}`` and a birth year ``{by}``, drawn in that order."""
    def make(rng: random.Random, facts: dict) -> str:
        year, month = _month(rng)
        first = FIRST_DATE_SK + 365 + 365 * (year - 1998)
        values = {"y": year, "m": month, "q": rng.randint(1, 4), "c": rng.choice(CATEGORIES),
                  "s": rng.choice(STATES), "b": f"brand#{rng.randrange(100)}",
                  "w": 53 + 52 * (year - 1998) + rng.randrange(52),
                  "k": first + rng.randrange(358), "t": rng.randint(1, facts["fact_rows"] // 8),
                  "by": rng.randint(1930, 1990)}
        return sql.format(**values)
    return make


TEMPLATES: tuple[Template, ...] = (
    Template("month_by_category", ("dimension filter", "star join"), month_by_category),
    Template("month_by_store_state", ("dimension filter", "star join"), _q(
        f"SELECT s_state, sum(ss_net_profit) AS profit FROM store_sales {_DATES} {_STORES} "
        "WHERE d_year = {y} AND d_moy = {m} GROUP BY s_state")),
    Template("quarter_top_brands", ("dimension filter", "order by limit"), _q(
        f"SELECT i_brand, sum(ss_sales_price) AS revenue FROM store_sales {_DATES} {_ITEMS} "
        "WHERE d_year = {y} AND d_qoy = {q} GROUP BY i_brand "
        "ORDER BY revenue DESC, i_brand LIMIT 10")),
    Template("year_by_customer_state", ("dimension filter", "star join"), _q(
        f"SELECT c_state, count(DISTINCT ss_customer_sk) AS buyers, sum(ss_sales_price) AS s "
        f"FROM store_sales {_DATES} {_CUSTOMERS} WHERE d_year = {{y}} GROUP BY c_state")),
    Template("week_in_category", ("dimension filter", "two filtered dimensions"), _q(
        f"SELECT d_date, sum(ss_quantity) AS qty FROM store_sales {_DATES} {_ITEMS} "
        "WHERE d_week_seq = {w} AND i_category = '{c}' GROUP BY d_date")),
    Template("day_tickets", ("dimension filter", "distinct"), _q(
        f"SELECT count(DISTINCT ss_ticket_number) AS tickets, sum(ss_sales_price) AS s "
        f"FROM store_sales {_DATES} WHERE d_date_sk = {{k}}")),
    Template("weekend_profit_by_store", ("dimension filter", "IN list"), _q(
        f"SELECT ss_store_sk, sum(ss_net_profit) AS profit FROM store_sales {_DATES} "
        "WHERE d_year = {y} AND d_moy = {m} AND d_dow IN (0, 6) GROUP BY ss_store_sk")),
    Template("cte_category_year_over_year", ("CTE self-join",), _q(
        "WITH m AS (SELECT i_category, d_year, sum(ss_sales_price) AS revenue "
        f"FROM store_sales {_DATES} {_ITEMS} WHERE d_moy = {{m}} AND d_year IN ({{y}}, {{y}} + 1)"
        " GROUP BY i_category, d_year) "
        "SELECT a.i_category, a.revenue AS before, b.revenue AS after FROM m a JOIN m b "
        "ON a.i_category = b.i_category AND b.d_year = a.d_year + 1")),
    Template("cte_customers_in_two_months", ("CTE self-join",), _q(
        "WITH buyers AS (SELECT DISTINCT ss_customer_sk, d_moy FROM store_sales "
        f"{_DATES} WHERE d_year = {{y}} AND d_moy IN ({{m}}, {{m}} % 12 + 1)) "
        "SELECT count(*) AS returning FROM buyers a JOIN buyers b "
        "ON a.ss_customer_sk = b.ss_customer_sk AND a.d_moy = {m} AND b.d_moy = {m} % 12 + 1")),
    Template("correlated_items_above_category_average", ("correlated subquery",), _q(
        "WITH sold AS (SELECT i_item_sk, i_category, sum(ss_sales_price) AS revenue "
        f"FROM store_sales {_DATES} {_ITEMS} WHERE d_year = {{y}} AND d_moy = {{m}} "
        "GROUP BY i_item_sk, i_category) "
        "SELECT count(*) AS items FROM sold s WHERE revenue > "
        "(SELECT 1.5 * avg(revenue) FROM sold t WHERE t.i_category = s.i_category)")),
    Template("correlated_exists_customers", ("correlated subquery", "EXISTS"), _q(
        "SELECT c_segment, count(*) AS customers FROM customer c WHERE c_state = '{s}' AND "
        f"EXISTS (SELECT 1 FROM store_sales {_DATES} WHERE ss_customer_sk = c.c_customer_sk "
        "AND d_year = {y} AND d_moy = {m}) GROUP BY c_segment")),
    Template("window_top_items_per_category", ("window",), _q(
        "SELECT * FROM (SELECT i_category, i_item_sk, revenue, rank() OVER (PARTITION BY "
        "i_category ORDER BY revenue DESC, i_item_sk) AS r FROM (SELECT i_category, i_item_sk, "
        f"sum(ss_sales_price) AS revenue FROM store_sales {_DATES} {_ITEMS} "
        "WHERE d_year = {y} AND d_moy = {m} GROUP BY i_category, i_item_sk)) WHERE r <= 3")),
    Template("window_running_daily_revenue", ("window",), _q(
        "SELECT d_date, revenue, sum(revenue) OVER (ORDER BY d_date) AS running FROM ("
        f"SELECT d_date, sum(ss_sales_price) AS revenue FROM store_sales {_DATES} "
        "WHERE d_year = {y} AND d_moy = {m} GROUP BY d_date)")),
    Template("window_month_over_month_per_store", ("window", "lag"), _q(
        "SELECT ss_store_sk, d_moy, revenue, revenue - lag(revenue) OVER (PARTITION BY "
        "ss_store_sk ORDER BY d_moy) AS change FROM (SELECT ss_store_sk, d_moy, "
        f"sum(ss_sales_price) AS revenue FROM store_sales {_DATES} WHERE d_year = {{y}} "
        "AND d_qoy = {q} GROUP BY ss_store_sk, d_moy)")),
    Template("in_subquery_brand_month", ("IN subquery", "dimension filter"), _q(
        f"SELECT d_dom, sum(ss_quantity) AS qty FROM store_sales {_DATES} "
        "WHERE d_year = {y} AND d_moy = {m} AND ss_item_sk IN "
        "(SELECT i_item_sk FROM item WHERE i_brand = '{b}') GROUP BY d_dom")),
    Template("date_key_week_range", ("fact range filter",), _q(
        "SELECT ss_store_sk, count(*) AS n, sum(ss_net_profit) AS profit FROM store_sales "
        "WHERE ss_sold_date_sk BETWEEN {k} AND {k} + 6 GROUP BY ss_store_sk")),
    Template("store_state_quarter", ("two filtered dimensions",), _q(
        f"SELECT s_city, sum(ss_sales_price) AS revenue FROM store_sales {_DATES} {_STORES} "
        "WHERE s_state = '{s}' AND d_year = {y} AND d_qoy = {q} GROUP BY s_city")),
    Template("customer_cohort_month", ("two filtered dimensions",), _q(
        f"SELECT c_preferred_cust_flag, sum(ss_sales_price) AS s FROM store_sales {_DATES} "
        f"{_CUSTOMERS} WHERE c_birth_year BETWEEN {{by}} AND {{by}} + 4 AND d_year = {{y}} "
        "AND d_moy = {m} GROUP BY c_preferred_cust_flag")),
    Template("rollup_category_class_month", ("rollup",), _q(
        f"SELECT i_category, i_class_id, sum(ss_sales_price) AS s FROM store_sales {_DATES} "
        f"{_ITEMS} WHERE d_year = {{y}} AND d_moy = {{m}} "
        "GROUP BY ROLLUP (i_category, i_class_id)")),
    Template("ticket_lookup", ("fact point lookup",), _q(
        f"SELECT ss_ticket_number, i_category, ss_quantity, ss_sales_price FROM store_sales "
        f"{_ITEMS} WHERE ss_ticket_number = {{t}}")),
    Template("quantity_band_by_month", ("fact filter", "dimension filter"), _q(
        f"SELECT d_moy, count(*) AS n FROM store_sales {_DATES} WHERE d_year = {{y}} "
        "AND ss_quantity BETWEEN 90 AND 100 GROUP BY d_moy")),
    Template("frequent_buyers_quarter", ("HAVING", "semi join"), _q(
        "SELECT c_state, count(*) AS customers FROM customer WHERE c_customer_sk IN ("
        f"SELECT ss_customer_sk FROM store_sales {_DATES} WHERE d_year = {{y}} AND "
        "d_qoy = {q} GROUP BY ss_customer_sk HAVING count(DISTINCT ss_ticket_number) >= 3) "
        "GROUP BY c_state")),
    Template("two_months_union", ("UNION ALL",), _q(
        f"SELECT 'first' AS part, sum(ss_sales_price) AS s FROM store_sales {_DATES} "
        "WHERE d_year = {y} AND d_moy = {m} UNION ALL "
        f"SELECT 'second' AS part, sum(ss_sales_price) AS s FROM store_sales {_DATES} "
        "WHERE d_year = {y} AND d_moy = {m} % 12 + 1")),
    Template("year_by_category", ("dimension filter", "a whole year"), _q(
        f"SELECT i_category, d_qoy, sum(ss_sales_price) AS s FROM store_sales {_DATES} "
        f"{_ITEMS} WHERE d_year = {{y}} GROUP BY i_category, d_qoy")),
)

#: the template whose fact bytes read are reported (a one-month dimension filter)
ONE_MONTH = "month_by_category"
