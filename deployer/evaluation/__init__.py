"""The meaning of CPL expressions and aggregates, row by row, in Python: the reference executor's,
and any engine's that evaluates expressions over Python rows. One module, so that an expression
fails, and an aggregate rounds, alike wherever it is evaluated."""
