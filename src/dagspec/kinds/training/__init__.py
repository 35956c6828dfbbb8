"""Training kinds: train_keras (custom TensorFlow loop), train_xgboost and train_spark_ml, with their helpers."""
