"""What flows in and out of a Spark deployment: file, generator and Redis sources, event time and
the Sequencers, sinks and dead letters."""
