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

"""The ``paging_fit`` goal: each guest in the paging pool that suits it."""

from watcher.decision_engine.goal import base
from watcher.decision_engine.goal.efficacy import base as efficacy_base
from watcher.decision_engine.goal.efficacy import indicators
from watcher.decision_engine.solution import efficacy

NAME = 'paging_fit'


class ModeledGainSeconds(indicators.IndicatorSpecification):
    def __init__(self):
        super().__init__(
            name='modeled_gain_seconds',
            description='Modeled guest time the proposed moves save over '
                        'the horizon, their migrations paid (cost model, '
                        'not a measurement).',
            unit='s')

    @property
    def schema(self):
        return {'type': 'number'}


class GuestsHeld(indicators.IndicatorSpecification):
    def __init__(self):
        super().__init__(
            name='guests_held',
            description='Adaptive guests not moved this audit, for a '
                        'reason the audit logs (cool-down, not worth it, '
                        'no room, budget, no figures, no pool).',
            unit=None)

    @property
    def schema(self):
        return {'type': 'integer', 'minimum': 0}


class FiguresDropped(indicators.IndicatorSpecification):
    def __init__(self):
        super().__init__(
            name='figures_dropped',
            description='Figures that cannot be true (not a finite number, '
                        'more gain than vCPUs x window, a host in both '
                        'pools), dropped rather than weighed.',
            unit=None)

    @property
    def schema(self):
        return {'type': 'integer', 'minimum': 0}


class PagingFitSpecification(efficacy_base.EfficacySpecification):
    def get_indicators_specifications(self):
        return [indicators.InstanceMigrationsCount(),
                ModeledGainSeconds(), GuestsHeld(), FiguresDropped()]

    def get_global_efficacy_indicator(self, indicators_map=None):
        value = indicators_map.modeled_gain_seconds if indicators_map else 0
        return [efficacy.Indicator(
            name='modeled_gain_seconds',
            description='Modeled guest time the plan saves over the '
                        'strategy\'s horizon (cost model).',
            unit='s', value=value)]


class PagingFit(base.Goal):
    """Run each guest whose flavor asks for adaptive paging in the paging
    pool (hap or shadow hosts of stock kernels) that suits it now."""

    @classmethod
    def get_name(cls):
        return NAME

    @classmethod
    def get_display_name(cls):
        return 'Paging fit'

    @classmethod
    def get_translatable_display_name(cls):
        return 'Paging fit'

    @classmethod
    def get_efficacy_specification(cls):
        return PagingFitSpecification()
