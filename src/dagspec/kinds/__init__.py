"""Stage kinds, one module per kind, grouped by family (io, transform, sampling, physics, ctr, training, scoring).

``base`` is the kind API (params model, ``@kind``, the stage context); ``catalog`` finds every kind.
"""
