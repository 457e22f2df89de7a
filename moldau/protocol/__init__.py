"""The Kafka wire protocol: framing, the kio codec adapter, API versions and record batch headers."""
