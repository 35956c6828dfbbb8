"""The physics kinds: synthetic topology-classifier events, ROOT ingestion, feature preparation.

The seed schema (SparkDLTrigger, Migliorini et al. 2020) every kind here speaks:
``hfeatures`` (14 high-level features), ``lfeatures`` (n particles x 19) and ``label``
(0 = QCD, 1 = tt, 2 = W+jets). ``docs/physics.md`` describes the features.

- ``generate_events``: kind ``generate_physics_events`` (the numpy core in ``generator``);
- ``hep_event_features``: ROOT collections -> the seed schema (its params in ``hep_event_params``, the
  numpy core in ``ingest``);
- ``topology_features``: the seed's feature preparation (the numpy core in ``topology``);
- ``root``: the ROOT reader behind ``read`` with ``format: root``;
- ``arrow``: Arrow <-> numpy helpers for jagged columns; ``names``: feature and class names.
"""
