"""The Airflow side: the compiler (spec -> DAG) and the operator; the only modules importing airflow.

Nothing here imports pyspark, tensorflow or xgboost: Airflow parses the DAG file every 30 s.
"""
