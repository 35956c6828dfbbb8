"""Kinds that reshape tables with Spark itself: ``sql``."""
