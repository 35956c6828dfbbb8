"""The params of kind ``hep_event_features``: which ROOT branches hold each particle collection.

Apart from the kind so that ``ingest`` (its numpy/Arrow core) and the kind both import them
without importing each other.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from dagspec.kinds.base import StageParams


class CollectionBranches(StageParams):
    """Branch names of one particle collection. Momentum as px/py/pz or pt/eta/phi; missing = 0."""

    px: str | None = None
    py: str | None = None
    pz: str | None = None
    e: str | None = Field(default=None, description="energy; else sqrt(p^2 + m^2)")
    pt: str | None = None
    eta: str | None = None
    phi: str | None = None
    mass: str | None = Field(default=None, description="mass branch (used when e is not given)")
    mass_value: float = Field(default=0.0, ge=0, description="mass when neither e nor mass is given")
    charge: str | None = None
    iso: str | None = Field(default=None, description="combined isolation (goes to ChPFIso, see docs)")
    iso_ch: str | None = None
    iso_gamma: str | None = None
    iso_neu: str | None = None
    iso_relative: bool = Field(default=False, description="isolation branches are already divided by pT")
    btag: str | None = Field(default=None, description="jets: b-tag discriminator")
    id: str | None = Field(default=None, description="boolean quality flag; objects where it is false are dropped")

    @model_validator(mode="after")
    def _momentum_is_complete(self) -> CollectionBranches:
        cartesian = (self.px, self.py, self.pz)
        polar = (self.pt, self.eta, self.phi)
        if all(cartesian) == all(polar):
            raise ValueError("give either px, py, pz or pt, eta, phi (exactly one of the two)")
        if (any(cartesian) and not all(cartesian)) or (any(polar) and not all(polar)):
            raise ValueError("px, py, pz (or pt, eta, phi) must be given together")
        return self

    def branches(self) -> list[str]:
        """Every branch this collection reads."""
        names = (self.px, self.py, self.pz, self.e, self.pt, self.eta, self.phi, self.mass, self.charge)
        more = (self.iso, self.iso_ch, self.iso_gamma, self.iso_neu, self.btag, self.id)
        return [n for n in (*names, *more) if n]


def _hzz(
    prefix: str, *, charge: bool = True, iso: bool = True, btag: bool = False, id_: bool = False
) -> CollectionBranches:
    return CollectionBranches(
        px=f"{prefix}_Px",
        py=f"{prefix}_Py",
        pz=f"{prefix}_Pz",
        e=f"{prefix}_E",
        charge=f"{prefix}_Charge" if charge else None,
        iso=f"{prefix}_Iso" if iso else None,
        btag=f"{prefix}_btag" if btag else None,
        id=f"{prefix}_ID" if id_ else None,
    )


class HepEventFeaturesParams(StageParams):
    """Per-collection branches -> the seed schema, with the CERN isolated-lepton selection.

    Defaults fit the CMS HEP tutorial file (uproot-HZZ.root). Set a collection to null when the
    input has none of it.
    """

    muons: CollectionBranches | None = Field(default_factory=lambda: _hzz("Muon"))
    electrons: CollectionBranches | None = Field(default_factory=lambda: _hzz("Electron"))
    photons: CollectionBranches | None = Field(default_factory=lambda: _hzz("Photon", charge=False))
    jets: CollectionBranches | None = Field(
        default_factory=lambda: _hzz("Jet", charge=False, iso=False, btag=True, id_=True)
    )
    met_px: str | None = "MET_px"
    met_py: str | None = "MET_py"
    met_pt: str | None = None
    met_phi: str | None = None
    lepton_pt_min: float = Field(default=23.0, ge=0, description="GeV; isolated lepton candidates")
    lepton_iso_max: float = Field(default=0.45, gt=0, description="relative isolation of the lepton")
    jet_pt_min: float = Field(default=30.0, ge=0, description="GeV; jets counted in HT, nJets, nBjets")
    jet_eta_max: float = Field(default=2.4, gt=0)
    btag_min: float = Field(default=1.74, description="a jet with btag > btag_min is a b jet")
    jets_as_particles: bool = Field(default=True, description="jets join lfeatures (no particle-type flag)")
    max_particles: int | None = Field(default=None, ge=1, description="keep at most this many particles")
    label: int | None = Field(default=None, ge=0, description="the class of every event (one sample per file)")
    label_col: str | None = Field(default=None, description="or: an input column holding the class")
    event_id_col: str | None = Field(default=None, description="input column for event_id (default: generated)")
    keep_columns: list[str] = Field(default_factory=list, description="input columns copied to the output")

    @model_validator(mode="after")
    def _consistent(self) -> HepEventFeaturesParams:
        if (self.label is None) == (self.label_col is None):
            raise ValueError("give exactly one of 'label' or 'label_col'")
        if self.muons is None and self.electrons is None:
            raise ValueError("the selection needs a lepton collection: muons or electrons")
        if (self.met_px is None) != (self.met_py is None) or (self.met_pt is None) != (self.met_phi is None):
            raise ValueError("MET needs both met_px and met_py, or both met_pt and met_phi")
        if self.met_px is not None and self.met_pt is not None:
            raise ValueError("give MET as met_px/met_py or as met_pt/met_phi, not both")
        return self
