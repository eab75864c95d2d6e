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

"""Guest-only counters as advisory mode reads them: an interval a vCPU's
event spent off the PMU is no data, not zero.

No machine here has a PMU that counts guest-only events, so
perf_event_open(2) cannot give these descriptors: each event's file is a
pipe holding the (count, time enabled, time running) records the kernel
would return to read(2).  Everything after the open is the real code.
"""

import os

import pytest

from nova_adaptive_paging.agent import advisory
from nova_adaptive_paging.costmodel import hardware as costhw
from nova_adaptive_paging import dsp
from nova_adaptive_paging.host import perf
from nova_adaptive_paging import profiles


class PipeCounters(perf.GuestCounters):
    """GuestCounters whose events are pipes (see the module docstring)."""

    def __init__(self, vcpus):
        self.fds, self.ends = [], []
        for _ in range(vcpus):
            pairs = [os.pipe() for _ in perf.EVENTS]
            self.fds.append(tuple(r for r, _ in pairs))
            self.ends.append(tuple(w for _, w in pairs))
        self._start_counting()

    def feed(self, *readings):
        """One (count, enabled, running) per vCPU and event, in order."""
        flat = [w for group in self.ends for w in group]
        assert len(readings) == len(flat)
        for w, reading in zip(flat, readings):
            os.write(w, perf._READING.pack(*reading))

    def close(self):
        super().close()
        for group in self.ends:
            for w in group:
                os.close(w)


@pytest.fixture
def counters():
    c = PipeCounters(vcpus=2)
    yield c
    c.close()


def test_intervals_sum_over_vcpus(counters):
    counters.feed((1000, 10, 10), (50, 10, 10), (3000, 10, 10), (70, 10, 10))
    assert counters.read() == (4000, 120)
    counters.feed((2000, 20, 20), (80, 20, 20), (3500, 20, 20), (90, 20, 20))
    assert counters.read() == (5500, 170)


def test_a_starved_dtlb_event_makes_the_interval_no_data(counters):
    counters.feed((1000, 10, 10), (50, 10, 10), (3000, 10, 10), (70, 10, 10))
    assert counters.read() == (4000, 120)
    # vCPU 1's dTLB event was enabled 10 units and never on the PMU.
    counters.feed((2000, 20, 20), (80, 20, 20), (3500, 20, 20), (70, 20, 10))
    assert counters.read() == (5500, None)
    # The next interval counts from there, the starved one left out.
    counters.feed((3000, 30, 30), (90, 30, 30), (4000, 30, 30), (75, 30, 20))
    assert counters.read() == (7000, 135)


def test_a_multiplexed_event_is_scaled_for_the_interval(counters):
    counters.feed((1000, 10, 10), (50, 10, 10), (3000, 10, 10), (70, 10, 10))
    counters.read()
    # On the PMU half of the interval: 20 seen, 40 estimated.
    counters.feed((1000, 20, 20), (70, 30, 20), (3000, 20, 20), (70, 20, 20))
    assert counters.read() == (4000, 160)


def test_advisory_mode_stays_on_an_uncounted_interval():
    """A starved dTLB counter once read as zero misses: TLB-bound work
    then looked cheap in hap mode.  Now the interval is no data, and the
    next one is counted from the totals the counters give after it."""
    generation = 'intel-nehalem'
    clock = iter(range(0, 10 ** 6, 5)).__next__
    advisor = advisory.Advisor(profiles.builtin(generation),
                               costhw.for_generation(generation), clock,
                               host_mode='shadow')
    seen = []
    step = advisor.engine.step
    advisor.engine.step = lambda s, e=0: (seen.append(s), step(s, e))[1]
    advisor.step(10 ** 9, 10 ** 7, 0)
    advisor.step(2 * 10 ** 9, None, 0)          # starved interval
    assert advisor.engine.last_rule == dsp.Rule.NO_DATA
    assert advisor.other_s == 0.0
    advisor.step(3 * 10 ** 9, 3 * 10 ** 7, 0)
    assert [s.valid for s in seen] == [False, True]
    # The counted interval: 1e9 instructions, 2e7 misses.
    assert (seen[1].instructions, seen[1].tlb_misses) == (10 ** 9,
                                                          2 * 10 ** 7)
    assert advisor.other_s != 0.0
