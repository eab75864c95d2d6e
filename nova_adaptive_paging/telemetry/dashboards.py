"""Grafana dashboards (placeholder until the builder lands)."""


def documents():
    return {}
