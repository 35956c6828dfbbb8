"""Names of the seed schema's features and classes, in array order."""

from __future__ import annotations

HLF_NAMES = (
    "HT",
    "MET",
    "phiMET",
    "MT",
    "nJets",
    "nBjets",
    "LepPt",
    "LepEta",
    "LepPhi",
    "LepIsoCh",
    "LepIsoGamma",
    "LepIsoNeu",
    "LepCharge",
    "LepIsEle",
)
PARTICLE_FEATURE_NAMES = (
    "Energy",
    "Px",
    "Py",
    "Pz",
    "Pt",
    "Eta",
    "Phi",
    "vtxX",
    "vtxY",
    "vtxZ",
    "ChPFIso",
    "GammaPFIso",
    "NeuPFIso",
    "isChHad",
    "isNeuHad",
    "isGamma",
    "isEle",
    "isMu",
    "Charge",
)
CLASS_NAMES = ("QCD", "tt", "W+jets")
