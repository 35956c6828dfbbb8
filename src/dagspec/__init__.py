"""dagspec: declarative ML pipelines on Spark, compiled to Airflow DAGs."""

__version__ = "0.1.0"
