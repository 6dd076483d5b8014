"""What the facade, the rule engine and the scheduler's jobs do to indexes and to the cache:
each operation validates its input, runs through the index kinds and the lifecycle (or the cache
tier), records an event and returns a value."""
