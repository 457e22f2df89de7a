"""Prometheus metrics of a node, with the names the Prometheus JMX exporter gives Kafka's MBeans (and, for
consumer lag, the names kafka_exporter uses), so dashboards built for Kafka read Moldau's.

- `counters.py`: what the request path bumps (records and bytes per topic, requests and their latency per
  API): plain integers in dicts, no locks and no allocation per record, read only when scraped.
- `collector.py`: the families `/metrics` answers, built at scrape time from those counters and from the
  node's state (partitions, ISRs, logs, the metadata quorum, connections, committed offsets).

The console's HTTP listener (moldau.console) serves them.
"""
