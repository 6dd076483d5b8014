"""The rule engine's Spark side: reads the query history, profiles the demanded sources, asks
the pure analyzer of :mod:`rules` for instructions and carries them out through the operations."""
