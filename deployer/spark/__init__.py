"""The Spark translation: the operator graph as Structured Streaming queries (`--engine spark`)."""
