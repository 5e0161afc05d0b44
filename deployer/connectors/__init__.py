"""Connectors shared by both engines: files, Redis streams (no pyspark here)."""
