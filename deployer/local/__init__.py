"""The reference executor: every operator's meaning, event by event, in-process (`--engine local`)."""
