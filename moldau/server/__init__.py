"""Network layer: listener, connections, request dispatch and one handler module per Kafka API."""
