"""Storage: read-to-end logs over the compacted internal topics and their record formats."""
