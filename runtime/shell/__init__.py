"""The worker shell: the process that wires the group layer, storage, the data plane and REST together."""
