"""Beyond one session: listing and removing sandboxes, snapshots, and the pool."""
