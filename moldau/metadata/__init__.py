"""Cluster metadata: records, the metadata log they live in, and the image replayed from it."""
