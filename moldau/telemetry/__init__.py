"""Client telemetry (KIP-714): metrics subscriptions kept as CLIENT_METRICS config resources, and what clients
push in answer to them."""
