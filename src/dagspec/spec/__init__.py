"""The spec layer: YAML with positions, the pydantic models of a spec, its loader and checks.

Knows nothing of Airflow or Spark: ``dagspec validate`` and the DAG file use it alone.
"""
