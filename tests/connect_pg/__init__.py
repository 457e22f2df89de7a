"""Tests of the PostgreSQL connectors against a real PostgreSQL, broker and worker."""
