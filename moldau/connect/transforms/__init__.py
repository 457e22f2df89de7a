"""Built-in single message transforms and predicates; every module here is scanned by the plugin registry."""
