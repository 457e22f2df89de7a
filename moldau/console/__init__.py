"""The console's HTTP listener (`console.listeners`, default http://127.0.0.1:8080), served by each broker.

Today it serves `/metrics` (Prometheus text format, moldau.metrics) and, on brokers, the client metrics pushed to
them (`/v1/client-metrics`, moldau.telemetry.http); the console's pages are not built yet.
`service.py` binds and serves the listener, `app.py` is its Starlette application.
"""
