"""Built-in connectors; every module here is scanned by the plugin registry."""
