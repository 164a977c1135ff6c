"""The group layer: the embedded Connect protocol, assignors, membership, the herder and the group records."""
