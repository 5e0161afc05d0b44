"""Pattern matching, shared by both engines: the automaton of docs/language.md's "Patterns" (the
reference executor runs it event by event, Spark inside its stateful processor, one key at a time)."""
