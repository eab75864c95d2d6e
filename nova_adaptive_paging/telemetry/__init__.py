"""Telemetry: the metric names and help texts (``metrics``); the agent's
collectors and the profiler's queries will live here too."""
