"""read format: root on the real TTree and RNTuple files, through uproot inside Spark tasks."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dagspec.errors import StageFailedError
from dagspec.kinds.io.read import ReadParams
from dagspec.kinds.physics.root import read_root
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.spark

HZZ = SHARED_DATA / "hep" / "uproot-HZZ.root"
RUN2012 = SHARED_DATA / "hep" / "Run2012BC_DoubleMuParked_Muons_1000evts_rntuple_v1-0-0-0.root"


def _params(path: Path | str, **kw: object) -> ReadParams:
    return ReadParams.model_validate({"format": "root", "path": str(path), **kw})


def test_ttree_glob_entry_ranges_and_selection(spark: SparkSession, tmp_path: Path) -> None:
    import uproot

    for name in ("a.root", "b.root"):
        shutil.copy(HZZ, tmp_path / name)
    metrics: dict = {}
    params = _params(tmp_path / "*.root", entries_per_task=1000, branches=["NMuon", "Muon_Px", "MET_px"])

    class Ctx:  # only .metrics is used by read_root
        pass

    ctx = Ctx()
    ctx.metrics = metrics  # type: ignore[attr-defined]
    df = read_root(spark, str(tmp_path / "*.root"), params, ctx)  # type: ignore[arg-type]
    assert df.columns == ["NMuon", "Muon_Px", "MET_px"]
    assert df.schema["Muon_Px"].dataType.simpleString() == "array<float>"
    assert metrics["root_files"] == 2 and metrics["root_tasks"] == 6  # 2421 entries -> 3 ranges per file
    assert df.rdd.getNumPartitions() == 6
    got = df.agg(
        F.count("*"),
        F.sum("NMuon"),
        F.sum(F.size("Muon_Px")),
        F.sum(F.aggregate("Muon_Px", F.lit(0.0), lambda a, x: a + x)),
    ).first()
    truth = uproot.open(HZZ)["events"].arrays(["NMuon", "Muon_Px"], library="np")
    assert got[0] == 2 * 2421
    assert got[1] == got[2] == 2 * int(truth["NMuon"].sum())
    assert got[3] == pytest.approx(2 * float(sum(a.astype(np.float64).sum() for a in truth["Muon_Px"])), rel=1e-9)


def test_rntuple_renames_and_reports_bad_branches(spark: SparkSession) -> None:
    import uproot

    params = _params(RUN2012, branches={"Muon_pt": "mu_pt", "nMuon": "n_mu"})
    df = read_root(spark, str(RUN2012), params)
    assert sorted(df.columns) == ["mu_pt", "n_mu"]
    row = df.agg(F.count("*"), F.sum("n_mu"), F.sum(F.size("mu_pt")), F.max(F.array_max("mu_pt"))).first()
    pts = uproot.open(RUN2012)["Events"].arrays(["Muon_pt"])["Muon_pt"]
    assert row[0] == 1000
    assert row[1] == row[2] == int(sum(len(x) for x in pts))
    assert row[3] == pytest.approx(float(max(max(x) for x in pts if len(x))))

    with pytest.raises(StageFailedError, match=r"no branch.*Muon_ptt.*did you mean 'Muon_pt'"):
        read_root(spark, str(RUN2012), _params(RUN2012, branches=["Muon_ptt"]))
    with pytest.raises(StageFailedError, match=r"no tree 'event'.*did you mean 'events'"):
        read_root(spark, str(HZZ), _params(HZZ, tree="event"))
    with pytest.raises(StageFailedError, match="no file matches"):
        read_root(spark, str(HZZ.parent / "nothing*.root"), _params(HZZ))
