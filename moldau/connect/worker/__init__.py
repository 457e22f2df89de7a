"""The Connect runtime: worker configuration, the stores behind it (configs, source offsets, statuses), the
threads that run source and sink tasks, the herder that owns connectors' lifecycles, and standalone mode."""
