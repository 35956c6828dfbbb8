"""Kinds that move data in and out: ``read`` (files -> table) and ``export`` (table -> published files)."""
