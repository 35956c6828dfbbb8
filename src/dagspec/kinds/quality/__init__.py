"""Data and model quality: expectation checks, model gates, and the helpers every reader and trainer shares.

``check`` and ``gate`` are kinds; ``quarantine`` keeps a reader's rejected rows in its checkpoint,
``labels`` checks a label column with one aggregation before a sampler, trainer or evaluator uses it.
"""
