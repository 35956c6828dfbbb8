"""Synthetic data generators behind ``dagspec generate NAME``.

Each module ``dagspec.generators.<name>`` defines ``add_arguments(parser)`` and ``run(args) -> int``
and imports Spark only inside ``run``.
"""

GENERATORS = ("physics", "criteo")
