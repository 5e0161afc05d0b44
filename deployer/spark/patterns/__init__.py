"""The Pattern operator on Spark (FROM PATTERN / FROM SEQUENCE): the shared automaton
(deployer.patterns) inside a stateful processor, one partition key at a time."""
