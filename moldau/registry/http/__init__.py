"""The registry's REST API (Confluent Schema Registry's paths, bodies, status and error codes) as a Starlette
app: `app.build_app`, with one module per group of routes."""
