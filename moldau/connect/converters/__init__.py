"""Built-in converters; every module here is scanned by the plugin registry."""
