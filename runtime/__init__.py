"""The worker runtime: group membership, internal-topic stores, the herder and the worker shell."""

__version__ = "0.1.0"
