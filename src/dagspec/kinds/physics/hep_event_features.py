"""Kind ``hep_event_features``: per-collection ROOT branches -> the seed schema (isolated lepton).

The params (``hep_event_params``) name, per collection (muons, electrons, photons, jets), the
branches to read; the numpy/Arrow work lives in ``ingest``. Defaults fit the CMS HEP tutorial file
(uproot-HZZ.root).
"""

from __future__ import annotations

from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, kind
from dagspec.kinds.physics.hep_event_params import HepEventFeaturesParams


@kind("hep_event_features", params=HepEventFeaturesParams, inputs={"data": TABLE})
def hep_event_features(inputs: Inputs, params: HepEventFeaturesParams, ctx: StageContext) -> Outputs:
    """Muons/electrons/photons/jets/MET branches -> hfeatures, lfeatures, label (isolated lepton).

    Collections of a ROOT read -> the seed schema, keeping events with an isolated lepton.
    """
    from dagspec.kinds.physics.ingest import build_event_features

    df = inputs.table("data")
    return {"data": build_event_features(df, params, ctx.metrics, keep=ctx.persist)}
