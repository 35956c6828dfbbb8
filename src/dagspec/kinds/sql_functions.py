"""Which functions a user's SQL may call: Spark's built-in functions, minus those that run code or read files.

A ``sql`` stage calls Spark 4.2's built-in functions only (``SPARK_FUNCTIONS``, the names
``SHOW SYSTEM FUNCTIONS`` lists), minus ``REFUSED``: ``reflect``, ``java_method`` and
``try_reflect`` call any static Java method (``System.getenv`` hands the server's environment to the
checkpoint, ``System.exit`` stops a shared Connect server), ``from_protobuf``/``to_protobuf`` read a
descriptor file by path, ``python_worker_logs`` reads the server's Python worker logs, and the Avro
functions take reader options that read a schema by URL (``avroSchemaUrl``). A function that is not
built in (a catalog function, a UDF registered in the session) is code dagspec does not
know, and is refused too.

Decided twice, by the same lists:

- in the text, by the params model (``text_call_refusal``): every name written right before a ``(``
  (backticked, qualified as ``system.builtin.reflect``, in any case, with comments or white space
  before the ``(``) against ``REFUSED``, the functions sqlglot's tree holds against the allowlist,
  and ``IDENTIFIER(...)`` used as a function's name;
- in the job, on Spark's analyzed plan (``plan_call_refusal``): Spark prints every function it
  resolved as ``name(`` in lowercase, whatever the query's spelling (``IDENTIFIER('reflect')(...)``
  included), and every such name must be allowed. The plan's text holds the query's strings and
  names unquoted, so a literal ``'f(x)'`` or a column named ``weight(kg)`` reads as a call and is
  refused too: a forged call can add a refusal, never hide a real one. Spark shortens a node with
  many fields (``... 5 more fields``); the plan is printed without that limit, and a shortened line
  is refused.
"""

from __future__ import annotations

import re
from typing import Any

# Spark 4.2's built-in functions named by an identifier (SHOW SYSTEM FUNCTIONS, operators left out);
# tests/kinds/transform/test_sql_calls.py compares it with the running Spark's list
SPARK_FUNCTIONS = frozenset(
    """
    abs acos acosh add_months aes_decrypt aes_encrypt aggregate and any any_value
    approx_count_distinct approx_percentile approx_top_k approx_top_k_accumulate
    approx_top_k_combine approx_top_k_estimate array array_agg array_append array_compact
    array_contains array_distinct array_except array_insert array_intersect array_join array_max
    array_min array_position array_prepend array_remove array_repeat array_size array_sort
    array_union arrays_overlap arrays_zip ascii asin asinh assert_true atan atan2 atanh avg base64
    between bigint bin binary bit_and bit_count bit_get bit_length bit_or bit_xor bitmap_and_agg
    bitmap_bit_position bitmap_bucket_number bitmap_construct_agg bitmap_count bitmap_or_agg
    bool_and bool_or boolean bround btrim cardinality case cast cbrt ceil ceiling char char_length
    character_length chr coalesce collate collation collations collect_list collect_set concat
    concat_ws contains conv convert_timezone corr cos cosh cot count count_if count_min_sketch
    covar_pop covar_samp crc32 csc cume_dist curdate current_catalog current_database current_date
    current_path current_schema current_time current_timestamp current_timezone current_user date
    date_add date_diff date_format date_from_unix_date date_part date_sub date_trunc dateadd
    datediff datepart day dayname dayofmonth dayofweek dayofyear decimal decode degrees dense_rank
    div double e element_at elt encode endswith equal_null every exists exp explode explode_outer
    expm1 extract factorial filter find_in_set first first_value flatten float floor forall
    format_number format_string from_avro from_csv from_json from_protobuf from_unixtime
    from_utc_timestamp from_xml get get_json_object getbit greatest grouping grouping_id hash hex
    histogram_numeric hll_sketch_agg hll_sketch_estimate hll_union hll_union_agg hour hypot if
    ifnull ilike in initcap inline inline_outer input_file_block_length input_file_block_start
    input_file_name instr int is_valid_utf8 is_valid_variant is_variant_null isnan isnotnull isnull
    java_method json_array_length json_object_keys json_tuple kll_merge_agg_bigint
    kll_merge_agg_double kll_merge_agg_float kll_sketch_agg_bigint kll_sketch_agg_double
    kll_sketch_agg_float kll_sketch_get_n_bigint kll_sketch_get_n_double kll_sketch_get_n_float
    kll_sketch_get_quantile_bigint kll_sketch_get_quantile_double kll_sketch_get_quantile_float
    kll_sketch_get_rank_bigint kll_sketch_get_rank_double kll_sketch_get_rank_float
    kll_sketch_merge_bigint kll_sketch_merge_double kll_sketch_merge_float
    kll_sketch_to_string_bigint kll_sketch_to_string_double kll_sketch_to_string_float kurtosis lag
    last last_day last_value lcase lead least left len length levenshtein like listagg ln
    localtimestamp locate log log10 log1p log2 lower lpad ltrim luhn_check make_date
    make_dt_interval make_interval make_time make_timestamp make_timestamp_ltz make_timestamp_ntz
    make_valid_utf8 make_ym_interval map map_concat map_contains_key map_entries map_filter
    map_from_arrays map_from_entries map_keys map_values map_zip_with mask max max_by md5 mean
    measure median min min_by minute mod mode monotonically_increasing_id month monthname
    months_between named_struct nanvl negative next_day not now nth_value ntile nullif nullifzero
    nvl nvl2 octet_length or overlay parse_json parse_url percent_rank percentile percentile_approx
    percentile_cont percentile_disc pi pmod posexplode posexplode_outer position positive pow power
    printf python_worker_logs quarter quote radians raise_error rand randn random randstr range rank
    reduce reflect regexp regexp_count regexp_extract regexp_extract_all regexp_instr regexp_like
    regexp_replace regexp_substr regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope
    regr_sxx regr_sxy regr_syy repeat replace reverse right rint rlike round row_number rpad rtrim
    schema_of_avro schema_of_csv schema_of_json schema_of_variant schema_of_variant_agg
    schema_of_xml sec second sentences sequence session_user session_window sha sha1 sha2 shiftleft
    shiftright shiftrightunsigned shuffle sign signum sin sinh size skewness slice smallint some
    sort_array soundex space spark_partition_id split split_part sql_keywords sqrt st_asbinary
    st_geogfromwkb st_geomfromwkb st_setsrid st_srid stack startswith std stddev stddev_pop
    stddev_samp str_to_map string string_agg struct substr substring substring_index sum tan tanh
    theta_difference theta_intersection theta_intersection_agg theta_sketch_agg
    theta_sketch_estimate theta_union theta_union_agg time time_bucket time_diff time_from_micros
    time_from_millis time_from_seconds time_to_micros time_to_millis time_to_seconds time_trunc
    timestamp timestamp_micros timestamp_millis timestamp_seconds tinyint to_avro to_binary to_char
    to_csv to_date to_json to_number to_protobuf to_time to_timestamp to_timestamp_ltz
    to_timestamp_ntz to_unix_timestamp to_utc_timestamp to_varchar to_variant_object to_xml
    transform transform_keys transform_values translate trim trunc try_add try_aes_decrypt try_avg
    try_divide try_element_at try_make_interval try_make_timestamp try_make_timestamp_ltz
    try_make_timestamp_ntz try_mod try_multiply try_parse_json try_parse_url try_reflect
    try_subtract try_sum try_to_binary try_to_date try_to_number try_to_time try_to_timestamp
    try_url_decode try_validate_utf8 try_variant_get tuple_difference_double
    tuple_difference_integer tuple_difference_theta_double tuple_difference_theta_integer
    tuple_intersection_agg_double tuple_intersection_agg_integer tuple_intersection_double
    tuple_intersection_integer tuple_intersection_theta_double tuple_intersection_theta_integer
    tuple_sketch_agg_double tuple_sketch_agg_integer tuple_sketch_estimate_double
    tuple_sketch_estimate_integer tuple_sketch_summary_double tuple_sketch_summary_integer
    tuple_sketch_theta_double tuple_sketch_theta_integer tuple_union_agg_double
    tuple_union_agg_integer tuple_union_double tuple_union_integer tuple_union_theta_double
    tuple_union_theta_integer typeof ucase unbase64 unhex uniform unix_date unix_micros unix_millis
    unix_seconds unix_timestamp upper url_decode url_encode user uuid validate_utf8 var_pop var_samp
    variance variant_explode variant_explode_outer variant_get vector_avg vector_cosine_similarity
    vector_inner_product vector_l2_distance vector_norm vector_normalize vector_sum version weekday
    weekofyear when width_bucket window window_time xpath xpath_boolean xpath_double xpath_float
    xpath_int xpath_long xpath_number xpath_short xpath_string xxhash64 year zeroifnull zip_with
    """.split()  # noqa: SIM905 - 551 names read better as words than as a list literal
)
_REFLECTION = "calls Java methods by reflection"
REFUSED = {
    "reflect": _REFLECTION,
    "java_method": _REFLECTION,
    "try_reflect": _REFLECTION,
    "from_protobuf": "reads a Protobuf descriptor file by path",
    "to_protobuf": "reads a Protobuf descriptor file by path",
    "python_worker_logs": "reads the Spark server's Python worker logs",
    # Avro's reader options include avroSchemaUrl, a schema read from a file or URL
    "from_avro": "takes Avro reader options, which can read a schema file by URL (avroSchemaUrl)",
    "to_avro": "takes Avro reader options, which can read a schema file by URL (avroSchemaUrl)",
    "schema_of_avro": "takes Avro reader options, which can read a schema file by URL (avroSchemaUrl)",
}
# what Spark's analyzed plans print as ``name(`` besides the functions: window frames, lambdas,
# syntax-only functions, outer references, data types in casts and schemas, Scala's Some(...)
PRINTED = frozenset(
    """
    windowspecdefinition specifiedwindowframe unboundedpreceding$ unboundedfollowing$ currentrow$
    lambdafunction namedlambdavariable pivotfirst try_cast timestampadd timestampdiff likeany likeall
    notlikeany notlikeall outer knownnullable knownnotnull precisetimestampconversion structfield
    structtype arraytype maptype decimaltype stringtype chartype varchartype varchar some
    """.split()  # noqa: SIM905
)
ALLOWED = (SPARK_FUNCTIONS | PRINTED) - REFUSED.keys()
_BUILTIN = ("system.builtin.", "builtin.")
_NAME = r"(?:`(?:[^`]|``)*`|[A-Za-z_][\w$]*)"
# a name written before ``(``, qualified or not (in a skeleton: comments blanked, strings emptied)
_WRITTEN_CALL = re.compile(rf"({_NAME}(?:\s*\.\s*{_NAME})*)\s*\(")
_IDENTIFIER = re.compile(r"\bidentifier\s*\(", re.IGNORECASE)
# a call as Spark prints it in a plan; a pivot's columns are named ``__pivot_<aggregate>``
_PRINTED_CALL = re.compile(r"([\w$.`]+)\(")
_TRUNCATED = re.compile(r"\.\.\. \d+ more fields")
ADVICE = (
    "a sql stage calls Spark's built-in functions only, without reflection or file reads; "
    "a kind of your own runs code (docs/security.md)"
)


def call_name(written: str) -> str:
    """The function a name written before ``(`` calls: ``` `System`.`builtin`.`Reflect` ``` -> ``reflect``."""
    parts = re.findall(r"`(?:[^`]|``)*`|[^.`\s]+", written)
    name = ".".join(p[1:-1].replace("``", "`") if p.startswith("`") else p for p in parts).lower()
    for prefix in _BUILTIN:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def text_call_refusal(skeleton_with_names: str, tree: Any) -> str | None:
    """Why a query calls what a sql stage may not, from its text, or None.

    ``skeleton_with_names`` is the query with comments blanked and strings emptied, backticked names
    kept; ``tree`` is sqlglot's tree of the query (None when it does not parse).
    """
    for found in _WRITTEN_CALL.finditer(skeleton_with_names):
        name = call_name(found.group(1))
        if name.rsplit(".", 1)[-1] in REFUSED:
            return f"{name}() {REFUSED[name.rsplit('.', 1)[-1]]} and is refused (docs/security.md)"
    for found in _IDENTIFIER.finditer(skeleton_with_names):
        end = _closing_paren(skeleton_with_names, found.end())
        if end is not None and skeleton_with_names[end + 1 :].lstrip().startswith("("):
            return "IDENTIFIER(...) as a function's name is refused: write the function's name (docs/security.md)"
    if tree is not None:
        from sqlglot import exp

        for function in tree.find_all(exp.Anonymous):
            if function.name.lower() == "identifier" or function.find_ancestor(exp.Hint) is not None:
                continue  # a clause naming a table or column (as a function's name, refused above), a hint
            written = (function.parent if isinstance(function.parent, exp.Dot) else function).sql("spark")
            name = call_name(written.split("(", 1)[0])
            last = name.rsplit(".", 1)[-1]
            if last in REFUSED:
                return f"{name}() {REFUSED[last]} and is refused (docs/security.md)"
            if name not in ALLOWED:
                return (
                    f"{name}() is not one of Spark's built-in functions, the only functions a sql stage calls "
                    "(a kind of your own runs code; docs/security.md)"
                )
    return None


def plan_call_refusal(lines: list[str]) -> tuple[str, str] | None:
    """What the analyzed plan ``lines`` calls that is refused, said as a verb phrase, and where (its line from
    just before the call); or None."""
    for line in lines:
        if _TRUNCATED.search(line):
            return "has a plan node too wide to check", line
        for found in _PRINTED_CALL.finditer(line):
            printed = found.group(1).replace("`", "")
            if re.fullmatch(r"[\d.]*", printed):
                continue  # not a name
            name = call_name(printed.removeprefix("__pivot_"))
            last = name.rsplit(".", 1)[-1]
            # the line from a little before the call: a wide node's call can be far to the right
            start = max(0, found.start() - 40)
            at = ("..." if start else "") + line[start:]
            if last in REFUSED:
                return f"{REFUSED[last]} ({name}(...))", at
            if name not in ALLOWED:
                return (
                    f"calls {name}(...), which is not one of Spark's built-in functions (a string or a name that "
                    "reads like a call counts: the plan shows them unquoted)"
                ), at
    return None


def _closing_paren(text: str, start: int) -> int | None:
    """The index of the ``)`` closing the ``(`` just before ``start``, or None."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return None
