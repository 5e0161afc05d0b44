"""OUTPUT rate limiting on Spark: the limiters of deployer.output in a stateful processor."""
