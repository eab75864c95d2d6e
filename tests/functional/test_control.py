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

"""Control: the scheduling tests must fail without the project.

Runs test_scheduling.py again, in a child pytest with the filter left out
of ``enabled_filters`` (so its request filter is never registered) and
flavors carrying ``hw:paging`` without the trait ``nova-paging flavor
set`` pairs with it, and checks that every test fails there but the few
that assert what the project must leave as Nova had it.  Otherwise those
tests would be testing the weighers, not the project.
"""

import os
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

from tests.functional import base

# What the project must not change, so passes without it too: a flavor
# without hw:paging, ironic nodes, and the API's validators, which do not
# depend on the scheduler; and the traits the agents publish.
INDEPENDENT_TESTS = {
    'test_pool_members_publish_the_trait',
    'test_no_paging_spec_boots_where_it_always_did',
    'test_baremetal_flavor_boots_on_the_nodes',
    'test_extra_spec_validation_at_latest_microversion',
}


class TestControl(unittest.TestCase):

    def test_scheduling_tests_fail_without_the_filter(self):
        here = os.path.dirname(__file__)
        report = os.path.join(os.environ.get('TMPDIR', '/tmp'),
                              'paging-control-%d.xml' % os.getpid())
        env = dict(os.environ, **{base.CONTROL_ENV: '1'})
        subprocess.run(
            [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
             '--junitxml', report, os.path.join(here, 'test_scheduling.py')],
            env=env, cwd=os.path.dirname(os.path.dirname(here)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            check=False)
        failed, names = set(), set()
        cases = list(ET.parse(report).getroot().iter('testcase'))
        for case in cases:
            names.add(case.get('name'))
            if any(child.tag in ('failure', 'error') for child in case):
                failed.add(case.get('name'))
        os.unlink(report)
        self.assertGreaterEqual(len(cases), 19)
        self.assertLessEqual(INDEPENDENT_TESTS, names)
        self.assertEqual(names - INDEPENDENT_TESTS, failed)
