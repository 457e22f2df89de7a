"""Partition logs on disk, in Apache Kafka's layout: segments, indexes, checkpoints, producer state."""
