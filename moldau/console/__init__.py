"""The console's HTTP listener (`console.listeners`, default http://127.0.0.1:8080), served by each broker.

It serves the web console's pages (pages/ with templates/ and static/; the console is a Kafka client of its own
cluster, clients.py), `/metrics` (Prometheus text format, moldau.metrics) and, on brokers, the client metrics
pushed to them (`/v1/client-metrics`, moldau.telemetry.http). `service.py` binds and serves the listener,
`listener.py` is the listener's Starlette application, which builds the pages' own (`app.py`) on the first request
that reaches them; `context.py` is what every page gets, `errors.py` how failures show.
"""
