"""From a spec and a run's context to resolved stages: rendered params, cache keys, paths, reasons.

No Spark and no Airflow: the operator, the CLI and the job all plan the same way.
"""
