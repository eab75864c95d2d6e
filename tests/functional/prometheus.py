#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

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
