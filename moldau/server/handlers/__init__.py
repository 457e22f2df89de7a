"""One module per Kafka API; `registry` maps API keys to them."""
