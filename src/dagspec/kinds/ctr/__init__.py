"""The CTR kinds: Criteo logs (generate, read), features and the benchmark report."""
