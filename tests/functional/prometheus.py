"""The telemetry tests' Prometheus: simhost.prometheus, required in CI
(NAP_REQUIRE_PROMETHEUS), skipped elsewhere when Debian's package is
missing."""

import os

import pytest

from nova_adaptive_paging.simhost import prometheus as server

free_port = server.free_port


def binaries():
    try:
        return server.binaries()
    except server.PrometheusMissing as exc:
        if os.environ.get('NAP_REQUIRE_PROMETHEUS'):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def Server(workdir, openmetrics_text):
    binaries()
    return server.Server(workdir, openmetrics=openmetrics_text)
