"""The job side: the spark-submit entry point and the runner; the only place creating a SparkSession."""
