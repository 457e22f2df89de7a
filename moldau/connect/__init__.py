"""Moldau's Connector API: Kafka Connect's model (connectors, tasks, converters, transforms) in Python, and a
runtime that runs them against a Moldau cluster with Kafka Connect's worker configs and REST API.

`moldau.connect.data` holds the Connect data model (schemas, structs), `moldau.connect.api` the plugin API,
`moldau.connect.config` the connector configuration definitions, `moldau.connect.plugins` the plugin registry,
and `moldau.connect.worker` the runtime (standalone mode).
"""
