"""Partitions as this broker hosts them: leadership, the logs behind them, and waiting for new data."""
