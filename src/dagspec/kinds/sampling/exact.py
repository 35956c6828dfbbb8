"""Exact-size random selection over Spark, without collecting rows (shared by undersample and sample)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from dagspec.errors import StageFailedError
from dagspec.kinds.sampling.row_hash import row_hash

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def take_exact(
    df: DataFrame,
    quotas: Mapping[str, int],
    seed: int,
    salt: str,
    class_col: str | None = None,
    key: Sequence[str] | None = None,
    *,
    persist: Callable[[DataFrame], DataFrame] | None = None,
    totals: Mapping[str, int] | None = None,
) -> DataFrame:
    """Exactly ``quotas[c]`` rows of each class ``c`` (or of the whole table under key ''), at random.

    Every row's rank is a seeded hash of its values (``row_hash``: the same rows whatever the
    partitioning; ties, i.e. identical rows, broken by a row id), and a class keeps its
    ``quotas[c]`` lowest (rank, id). Nothing is sorted: the narrow table of (class, rank, id) is
    kept on local disk, and each class's threshold found by counting it in rank buckets (4,096 per
    pass, each pass within the bucket the quota falls in) until the bucket is small enough to
    fetch (at most ``FETCHED`` ids per class: one counting pass up to about 4x10^7 rows of a
    class, two up to 10^11). The wide rows are then filtered against those thresholds without
    being shuffled. Exact, fully parallel, and nothing but counts and a bucket's ids reach the
    driver. The input is a Parquet checkpoint, so rank and id are the same in both passes over it.

    With ``persist`` (the stage's, released once the outputs are written) and samples of at most
    about half the rows, the input is read and hashed once: the rows whose rank lies below a bound
    that holds the quota's row but for a 6-sigma draw (``_bounds``) are kept, and the thresholds
    and the rows come from them; when they do not hold a class's quota (identical rows share a
    rank), the two passes over the input run instead. ``totals``: the rows per class, when known.
    """
    ranked = _ranked(df, seed, salt, class_col, key)
    if persist is not None:
        if totals is None:
            totals = _class_counts(ranked.select("__class"))
        bounds = _bounds(quotas, totals)
        if bounds is not None:
            kept = persist(ranked.where(_below(bounds)))
            held = _class_counts(kept)
            if all(held.get(c, 0) >= q for c, q in quotas.items() if q > 0):
                thresholds = _thresholds(kept.select("__class", "__rank", "__row"), quotas, counted=held)
                return _within_thresholds(kept, thresholds)
    return _within_thresholds(ranked, _thresholds(ranked.select("__class", "__rank", "__row"), quotas))


TOPK_MAX = 100_000  # rows a one-pass draw holds per task (Spark's top-k, or a class's sorted window)


def lowest_ranked(
    df: DataFrame,
    quotas: Mapping[str, int],
    seed: int,
    salt: str,
    class_col: str | None = None,
    key: Sequence[str] | None = None,
    *,
    totals: Mapping[str, int] | None = None,
) -> DataFrame | None:
    """``take_exact``'s rows in one pass over ``df`` when the quotas add up to at most ``TOPK_MAX``:
    the rows whose rank lies below ``_bounds``' 6-sigma bounds, then (one class) Spark's top-k by
    (rank, row id), or (classes) each class's rows in that order, numbered in a window and cut at
    its quota; nothing kept on disk. None when the quotas are larger or the bounds would keep over
    half the rows. ``totals``: the rows per class, when known.

    The result may hold fewer rows than the quotas (identical rows share a rank, so a group of them
    lies on one side of a bound; or a 6-sigma miss): the caller has the runtime check the count
    written (``StageContext.expect_rows``) and fall back to ``take_exact``.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    quotas = {c: q for c, q in quotas.items() if q > 0}
    if not quotas or sum(quotas.values()) > TOPK_MAX:
        return None
    ranked = _ranked(df, seed, salt, class_col, key)
    if totals is None:
        totals = _class_counts(ranked.select("__class"))
    _require(quotas, totals)
    bounds = _bounds(quotas, totals)
    if bounds is None:
        return None
    candidates = ranked.where(_below(bounds))
    if class_col is None:
        return candidates.orderBy("__rank", "__row").limit(quotas[""]).drop("__class", "__rank", "__row")
    quota = F.lit(0)
    for cls, q in quotas.items():
        quota = F.when(F.col("__class") == F.lit(cls), F.lit(q)).otherwise(quota)
    place = F.row_number().over(Window.partitionBy("__class").orderBy("__rank", "__row"))
    placed = candidates.withColumn("__place", place)
    return placed.where(F.col("__place") <= quota).drop("__class", "__rank", "__row", "__place")


def _ranked(df: DataFrame, seed: int, salt: str, class_col: str | None, key: Sequence[str] | None) -> DataFrame:
    """``df`` with ``__class`` (the class as a string, or ''), ``__rank`` (``row_hash``) and ``__row`` (an id)."""
    from pyspark.sql import functions as F

    class_key = F.col(class_col).cast("string") if class_col else F.lit("")
    return (
        df.withColumn("__class", class_key)
        .withColumn("__rank", row_hash(df, seed, salt, key))
        .withColumn("__row", F.monotonically_increasing_id())
    )


def _below(bounds: Mapping[str, int | None]) -> Column:
    """A ranked row of a class with a bound, below it (``_bounds``; None: every row of the class)."""
    from pyspark.sql import functions as F

    below = F.lit(False)
    for cls, bound in bounds.items():
        rank_ok = F.lit(True) if bound is None else F.col("__rank") < F.lit(bound)
        below = below | ((F.col("__class") == F.lit(cls)) & rank_ok)
    return below


def _require(quotas: Mapping[str, int], totals: Mapping[str, int]) -> None:
    missing = {c: (q, totals.get(c, 0)) for c, q in quotas.items() if totals.get(c, 0) < q}
    if missing:
        detail = ", ".join(f"{c or 'all rows'}: asked {q}, have {have}" for c, (q, have) in missing.items())
        raise StageFailedError(f"not enough rows to sample exactly: {detail}")


def _within_thresholds(ranked: DataFrame, thresholds: Mapping[str, tuple[int, int]]) -> DataFrame:
    """The ranked rows at or below their class's (rank, row id) threshold, without the ranking columns."""
    from pyspark.sql import functions as F

    keep = F.lit(False)
    for cls, (rank, row) in thresholds.items():
        within = (F.col("__rank") < F.lit(rank)) | ((F.col("__rank") == F.lit(rank)) & (F.col("__row") <= F.lit(row)))
        keep = keep | ((F.col("__class") == F.lit(cls)) & within)
    return ranked.where(keep).drop("__class", "__rank", "__row")


SUPERSET_MAX = 0.5  # above this share of the rows, keeping them costs more than a second read


def _bounds(quotas: Mapping[str, int], totals: Mapping[str, int]) -> dict[str, int | None] | None:
    """Per class with a quota: a rank below which its quota's row lies but for a 6-sigma draw (None:
    every row of the class); None when the rows below the bounds would be above ``SUPERSET_MAX``."""
    bounds: dict[str, int | None] = {}
    expected = 0.0
    for cls, quota in quotas.items():
        total = totals.get(cls, 0)
        if quota <= 0 or total <= 0:
            continue
        p = min(1.0, quota / total)
        high = p + 6 * math.sqrt(p * (1 - p) / total) + 16 / total
        expected += min(1.0, high) * total
        bound = -(2**63) + int(high * 2**64)
        bounds[cls] = bound if bound < 2**63 else None
    return bounds if expected <= SUPERSET_MAX * sum(totals.values()) else None


BUCKET_BITS = 12
FETCHED = 10_000


def _class_counts(df: DataFrame) -> dict[str, int]:
    from pyspark.sql import functions as F

    return {r["__class"]: int(r["n"]) for r in df.groupBy("__class").agg(F.count("*").alias("n")).collect()}


def _thresholds(
    narrow: DataFrame, quotas: Mapping[str, int], counted: Mapping[str, int] | None = None
) -> dict[str, tuple[int, int]]:
    """Per class with a positive quota: the (rank, row id) of its quota-th row in (rank, id) order.

    Each pass counts the candidates of every class in ``2**BUCKET_BITS`` buckets of the next bits
    of the rank (a signed shift keeps the order of signed ranks), then of the row id when one rank
    holds more than ``FETCHED`` rows (identical rows), and keeps the bucket the quota's row falls
    in; the last bucket's (rank, id) are fetched and the row picked by sorting them. ``counted``:
    the rows per class of a ``narrow`` its caller keeps already (neither kept nor counted again).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    # on disk: 11M ranked rows in the server's heap ran it out
    kept = narrow if counted is not None else narrow.persist(StorageLevel.DISK_ONLY)
    try:
        totals = dict(counted) if counted is not None else _class_counts(kept)
        _require(quotas, totals)
        wanted = {c: q for c, q in quotas.items() if q > 0}  # the place of the row sought among the candidates
        within = {c: F.lit(True) for c in wanted}  # a class's candidates
        size = {c: totals[c] for c in wanted}
        for column in ("__rank", "__row"):
            shift = 64
            while wanted and max(size.values()) > FETCHED and shift > 0:
                shift = max(0, shift - BUCKET_BITS)
                bits = F.shiftright(column, shift)
                counts = (
                    _candidates(kept, within).groupBy("__class", bits.alias("b")).agg(F.count("*").alias("n")).collect()
                )
                for c in wanted:
                    below = 0
                    for b, n in sorted((int(r["b"]), int(r["n"])) for r in counts if r["__class"] == c):
                        if below + n >= wanted[c]:
                            within[c], size[c], wanted[c] = within[c] & (bits == F.lit(b)), n, wanted[c] - below
                            break
                        below += n
        found: dict[str, list[tuple[int, int]]] = {c: [] for c in wanted}
        for r in _candidates(kept, within).select("__class", "__rank", "__row").collect():
            found[r["__class"]].append((int(r["__rank"]), int(r["__row"])))
        return {c: sorted(found[c])[k - 1] for c, k in wanted.items()}
    finally:
        if counted is None:
            kept.unpersist()


def _candidates(narrow: DataFrame, within: Mapping[str, Column]) -> DataFrame:
    """The rows of the classes sought that are still candidates."""
    from pyspark.sql import functions as F

    keep = F.lit(False)
    for c, condition in within.items():
        keep = keep | ((F.col("__class") == F.lit(c)) & condition)
    return narrow.where(keep)
