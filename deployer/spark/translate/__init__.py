"""The graph's operators as Spark DataFrames: the vocabulary every handler shares (`SparkGraph`), the
handler table, columns and expressions, the stateless operators and the join."""
