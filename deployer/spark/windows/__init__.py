"""Aggregates over TIME, TUPLE and BATCH windows on Spark: the window's state, and the rows it makes."""
