"""Running a Spark deployment: the session, the queries a script splits into, their progress and
failures, the checkpoint's manifest and the rule for resuming a changed script."""
