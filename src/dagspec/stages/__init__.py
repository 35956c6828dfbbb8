"""Stage functions: pure functions of (inputs, params, context) over Spark DataFrames."""
