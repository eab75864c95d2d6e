"""Telemetry: the metric names and help texts (:mod:`.metrics`), the
agent's collector, the PromQL the profiler, the fleet strategy and the
rules read, and the rules, alerts and dashboards generated from code."""
