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

"""The paging cost model: hardware cost profiles, traces, the evaluator.

Everything in this package is a *model*: execution times it prints are
computed from per-event costs, never measured.  See
doc/source/simulation.rst.
"""

import importlib.resources

MODELED_NOTE = ('modeled: times come from the cost model in '
                'nova_adaptive_paging.costmodel, not from a measurement')


def data_dir(kind):
    """A directory of shipped data ('traces' or 'hardware')."""
    root = importlib.resources.files(__name__)
    return root / 'data' / kind


def data_files(kind, suffix):
    """Shipped data files of one kind, sorted by name."""
    return sorted((p for p in data_dir(kind).iterdir()
                   if p.name.endswith(suffix)), key=lambda p: p.name)
