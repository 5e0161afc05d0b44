"""The operators that call a data store on Spark: ReadSQL, UpdateSQL (one call per Arrow batch) and
Materialize."""
