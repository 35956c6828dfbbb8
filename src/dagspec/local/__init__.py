"""Local use: the ``dagspec`` command, local Airflow and Spark services, the data generators' CLI."""
