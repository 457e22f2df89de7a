"""The built-in schema registry: Confluent Schema Registry's REST API served by every broker.

Holds the schema formats and their compatibility rules (`formats/`, `compatibility.py`), the registry's state as
replayed from the `_schemas` topic, the HTTP service, and the broker-side validation of produced records.
"""
