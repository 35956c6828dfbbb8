"""A ``sql`` stage's query is parsed as Spark SQL when the spec loads (sqlglot, no JVM).

SPARK_ACCEPTS and SPARK_REFUSES were sorted by Spark 4.2's own parser (``CatalystSqlParser``):
every query Spark accepts must load, every typo below must fail ``dagspec validate``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError
from dagspec.kinds.transform.sql import syntax_error
from dagspec.spec.loader import load_spec
from tests.helpers import spec_issues, write_spec

SPARK_ACCEPTS = r"""
SELECT a, explode(xs) AS x FROM data
SELECT a, x FROM data LATERAL VIEW explode(xs) t AS x
SELECT a, x FROM data LATERAL VIEW OUTER explode(xs) t AS x
SELECT * FROM data PIVOT (sum(v) FOR k IN ('a', 'b'))
SELECT * FROM data UNPIVOT (v FOR k IN (a, b))
SELECT id, row_number() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM data
SELECT id, sum(v) OVER w FROM data WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
SELECT transform(xs, x -> x + 1), filter(xs, x -> x > 0), aggregate(xs, 0, (acc, x) -> acc + x) FROM data
SELECT s.field, m['k'], arr[0], element_at(m, 'k') FROM data
SELECT * FROM data WHERE ts > current_timestamp() - INTERVAL 1 DAY
SELECT * FROM data WHERE ts > current_timestamp() - INTERVAL '1' HOUR
SELECT /*+ BROADCAST(b) */ * FROM a JOIN b USING (id)
SELECT id::string, cast(v AS DECIMAL(10, 2)), try_cast(s AS INT) FROM data
SELECT count(*) FILTER (WHERE v > 0) FROM data
SELECT * FROM data WHERE s RLIKE '^a.*' AND s ILIKE 'x%' AND s LIKE ANY ('a%', 'b%')
SELECT k, count(*) FROM data GROUP BY ALL
SELECT k, j, count(*) FROM data GROUP BY GROUPING SETS ((k), (j), ())
SELECT k, j, count(*) FROM data GROUP BY ROLLUP (k, j)
SELECT k, j, count(*) FROM data GROUP BY CUBE (k, j)
SELECT 7 DIV 2, a <=> b, s || 't', a IS DISTINCT FROM b FROM data
SELECT TIMESTAMP '2026-01-01 00:00:00', DATE '2026-01-01', X'AB', 1Y, 2S, 3L, 1.5BD, 1.5D FROM data
SELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, name)
VALUES (1, 2), (3, 4)
TABLE data
FROM data SELECT id WHERE id > 1
SELECT * FROM data LIMIT ALL
SELECT * FROM data ORDER BY id LIMIT 10 OFFSET 5
SELECT * FROM a LEFT ANTI JOIN b ON a.id = b.id
SELECT * FROM a LEFT SEMI JOIN b ON a.id = b.id
SELECT * FROM a NATURAL JOIN b
SELECT * FROM a FULL OUTER JOIN b ON a.id = b.id
SELECT * FROM a CROSS JOIN b
SELECT CASE WHEN v > 0 THEN 'p' WHEN v < 0 THEN 'n' ELSE 'z' END FROM data
SELECT array(1, 2)[0], struct(a, b).a, named_struct('x', 1).x, map(1, 'a')[1] FROM data
SELECT `a col`, `b``c` FROM data
SELECT * FROM data TABLESAMPLE (10 PERCENT)
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FROM data
SELECT percentile_approx(v, 0.5), approx_count_distinct(k) FROM data
FROM data |> WHERE id > 1 |> SELECT id
SELECT * FROM a, LATERAL (SELECT * FROM b WHERE b.id = a.id)
WITH x AS (SELECT * FROM data), y AS (SELECT * FROM x) SELECT * FROM y
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r
SELECT * FROM a UNION SELECT * FROM b EXCEPT SELECT * FROM c INTERSECT SELECT * FROM d
SELECT * FROM a MINUS SELECT * FROM b
SELECT * EXCEPT (a) FROM data
SELECT date_add(d, 1), datediff(a, b), date_format(ts, 'yyyy-MM-dd'), to_date(s, 'yyyy-MM-dd') FROM data
SELECT if(v > 0, 1, 0), nvl(a, 0), coalesce(a, b), nullif(a, b), ifnull(a, 1) FROM data
SELECT * FROM data WHERE id IN (SELECT id FROM other) AND EXISTS (SELECT 1 FROM other WHERE other.id = data.id)
SELECT * FROM data WHERE id NOT BETWEEN 1 AND 10
SELECT k, max_by(v, ts), min_by(v, ts), collect_list(v), collect_set(v) FROM data GROUP BY k
SELECT k FROM data GROUP BY k HAVING count(*) > 1
SELECT k, count(*) FROM data GROUP BY 1 ORDER BY 2 DESC NULLS LAST
SELECT sequence(1, 10), array_contains(xs, 1), size(xs), slice(xs, 1, 2), flatten(xss) FROM data
SELECT * FROM data QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts) = 1
SELECT id, label, cast(rand(42) * 10 AS INT) AS bucket FROM data
SELECT regexp_extract(s, '(\\d+)', 1), split(s, ','), concat_ws('-', a, b) FROM data
SELECT "double quoted string", 'single' FROM data
SELECT r'raw\string' FROM data
SELECT hash(id) % 10 AS b, xxhash64(id), md5(s), sha2(s, 256) FROM data
SELECT * FROM data WHERE s = 'it''s'
SELECT * FROM data WHERE s = 'it\'s'
SELECT to_json(struct(*)) FROM data
SELECT from_json(s, 'a INT, b STRING') FROM data
SELECT inline(array(struct(1, 'a'))) FROM data
SELECT posexplode(xs) AS (pos, x) FROM data
SELECT stack(2, 'a', 1, 'b', 2) AS (k, v) FROM data
SELECT try_divide(a, b), try_add(a, b), a % b, pmod(a, b), -a, ~a, a & b, a | b, a ^ b, shiftleft(a, 1) FROM data
SELECT a >> 1, a << 1 FROM data
SELECT mode(v), median(v), stddev(v), variance(v), corr(a, b), covar_pop(a, b) FROM data
SELECT bool_and(f), bool_or(f), every(f), some(f), any(f) FROM data
SELECT count_if(v > 0), sum(DISTINCT v), count(DISTINCT a, b) FROM data
SELECT lag(v, 1) OVER (ORDER BY ts), lead(v) OVER (ORDER BY ts), first_value(v) IGNORE NULLS OVER (ORDER BY ts) FROM data
SELECT * FROM range(10)
SELECT * FROM range(0, 10, 2, 4)
SELECT * FROM explode(array(1, 2))
SELECT id FROM data -- trailing comment
/* leading */ SELECT id FROM data
SELECT id FROM data;
SELECT timestampadd(HOUR, 1, ts), timestampdiff(DAY, a, b), extract(YEAR FROM ts), date_part('month', ts) FROM data
SELECT make_interval(1, 2), INTERVAL '1-2' YEAR TO MONTH, INTERVAL '1 02:03:04' DAY TO SECOND FROM data
SELECT * FROM data AS d(a, b)
SELECT struct(a AS x, b AS y) FROM data
SELECT array_sort(xs, (l, r) -> CASE WHEN l < r THEN -1 ELSE 1 END) FROM data
SELECT zip_with(a, b, (x, y) -> x + y), map_filter(m, (k, v) -> v > 0), transform_values(m, (k, v) -> v + 1) FROM data
SELECT exists(xs, x -> x > 1), forall(xs, x -> x > 0), reduce(xs, 0, (a, x) -> a + x) FROM data
SELECT k, v FROM data WHERE k IN ('a', 'b') AND v IS NOT NULL AND NOT (v = 0)
SELECT * FROM data WHERE id > 1 AND label = 1 OR label IS NULL
SELECT input_file_name(), current_date(), now(), uuid(), monotonically_increasing_id(), spark_partition_id() FROM data
SELECT to_timestamp(s), unix_timestamp(ts), from_unixtime(n), window(ts, '10 minutes') FROM data
SELECT k, sum(v) FROM data GROUP BY k, window(ts, '1 hour')
SELECT * FROM data WHERE v BETWEEN -1.5e3 AND 1E10
SELECT cast(x AS ARRAY<STRUCT<a: INT>>) FROM data
SELECT a FROM data WHERE a = :p
SELECT a FROM data WHERE a = ?
SELECT collate('a', 'UTF8_LCASE'), 'a' COLLATE UTF8_LCASE FROM data
SELECT * FROM data WHERE s LIKE 'a!%' ESCAPE '!'
SELECT * FROM (SELECT * FROM data) t
SELECT * FROM (SELECT * FROM data)
SELECT id FROM data WHERE id > 0 ORDER BY id NULLS FIRST
SELECT named_struct('a', 1), map_from_arrays(ks, vs), str_to_map('a:1,b:2') FROM data
SELECT label, COUNT(*) AS n FROM data GROUP BY label
SELECT v:a.b, v:c[0] FROM data
SELECT parse_json('{"a": 1}') FROM data
SELECT variant_get(v, '$.a', 'int') FROM data
SELECT * FROM data WHERE ts >= '2026-01-01' AND ts < '2026-02-01'
SELECT a, b FROM data ORDER BY a ASC, b DESC
SELECT a AS `select`, b AS `from` FROM data
SELECT a AS order_id, b AS `group` FROM data
SELECT user, date, timestamp, key, value, type, year, month, day, hour, minute, second FROM data
SELECT count(1) AS cnt FROM data
SELECT * FROM data WHERE NOT EXISTS (SELECT 1 FROM x WHERE x.id = data.id)
SELECT * FROM data JOIN other ON data.id = other.id AND data.ts BETWEEN other.a AND other.b
SELECT v:a.b, v:c[0], v:a::int FROM data
SELECT values FROM data
SELECT a AS select FROM data
SELECT * FROM data where
SELECT any, cross, outer FROM data
SELECT t.not FROM data t
SELECT x FROM data WHERE values > 1
SELECT window, filter, over, partition FROM data
""".strip().splitlines()

SPARK_REFUSES = r"""
SELECT * form data
SELECT id FROM data WHERE id > 1 form data
SELECT id FROM data GROUP id
SELECT id FROM data ORDER id
SELECT count(* FROM data
SELECT 'abc FROM data
SELECT id FROM data WHERE id = = 1
SELECT id FROM data LIMIT 1 1
SELECT id FROM data WHERE (id > 1
SELECT id FRM data
SELECT id FROM data WHERE id IN (1, 2
SELECT CASE WHEN id > 1 THEN 1 FROM data
SELECT id FROM data WHERE id > 1 AND
""".strip().splitlines()


@pytest.mark.parametrize("query", SPARK_ACCEPTS)
def test_a_query_spark_accepts_parses(query: str) -> None:
    assert syntax_error(query) is None


@pytest.mark.parametrize("query", SPARK_REFUSES)
def test_a_typo_spark_refuses_is_found(query: str) -> None:
    assert (syntax_error(query) or "").startswith("does not parse as Spark SQL: ")


def _issues(tmp_path: Path, text: str) -> list[str]:
    return spec_issues(tmp_path, text, "typo.yaml")


def test_a_typo_is_a_validate_error_at_the_query(tmp_path: Path) -> None:
    found = _issues(
        tmp_path,
        """
        stages:
          raw: {kind: read, params: {format: parquet, path: /data/x}}
          enriched:
            kind: sql
            inputs: {data: raw}
            params:
              query: SELECT * form data
        """,
    )
    assert found == [
        "pipelines/typo.yaml:7:14: stages.enriched.params.query: does not parse as Spark SQL: Invalid expression / "
        "Unexpected token at 'data' (line 1, col 18 of the query) (got 'SELECT * form data')"
    ]


def test_a_templated_query_is_parsed_once_rendered_with_the_defaults(tmp_path: Path) -> None:
    found = _issues(
        tmp_path,
        """
        params:
          cut: {type: integer, default: 1}
        stages:
          raw: {kind: read, params: {format: parquet, path: /data/x}}
          day: {kind: sql, inputs: {data: raw}, params: {query: "SELECT * FROM data WHERE day = '{{ ds }}'"}}
          cut:
            kind: sql
            inputs: {data: raw}
            params:
              query: "SELECT *\\nFROM data WHERE id > {{ params.cut }} form data"
        """,
    )
    assert found == [
        "pipelines/typo.yaml:10:14: stages.cut.params.query: does not parse as Spark SQL: Invalid expression / "
        "Unexpected token at 'form' (line 2, col 27 of the query) (got 'SELECT *\\nFROM data WHERE id > 1 form data', "
        "rendered from 'SELECT *\\nFROM data WHERE id > {{ params.cut }} form data')"
    ]


def test_an_unclosed_string_is_found() -> None:
    assert (
        syntax_error("SELECT 'abc FROM data") == "does not parse as Spark SQL: Error tokenizing 'SELECT 'abc FROM dat'"
    )


def test_a_template_not_rendered_yet_is_left_to_the_check_after_rendering() -> None:
    assert syntax_error("SELECT * FROM data WHERE {{ params.cond }}") is None


def test_a_query_reading_a_name_that_is_no_input_is_a_located_validate_error(tmp_path: Path) -> None:
    spec = """dag_id: views
stages:
  raw: {kind: read, params: {format: parquet, path: /data/in}}
  enriched:
    kind: sql
    inputs: {data: raw}
    params: {query: "WITH t AS (SELECT * FROM data) SELECT * FROM t JOIN dta USING (id)"}
  fine:
    kind: sql
    inputs: {data: raw, other: raw}
    params: {query: "SELECT * FROM DATA d JOIN other o ON d.id = o.id CROSS JOIN range(3)"}
"""
    path = write_spec(tmp_path, spec)
    with pytest.raises(SpecValidationError) as raised:
        load_spec(path)
    lines = [str(i) for i in raised.value.issues]  # type: ignore[attr-defined]
    assert lines == [
        f"{path}:7:21: stages.enriched.params.query: reads 'dta', which is none of the stage's "
        "inputs (data) (did you mean 'data'?); each input is a view named by its role under inputs:"
    ], lines
