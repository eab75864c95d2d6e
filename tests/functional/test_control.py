"""Control: the scheduling tests must fail without the filter.

Runs test_scheduling.py again, in a child pytest with the filter left out
of ``enabled_filters``, and checks that every test that is about where a
guest lands fails there.  Otherwise those tests would be testing the
weighers, not the filter.
"""

import os
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

from tests.functional import base

# The one test of test_scheduling.py that does not depend on the filter,
# and so passes without it: the API's extra-spec validation.
FILTER_INDEPENDENT = {'test_extra_spec_validation_at_latest_microversion'}


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
        outcome = {}
        for case in ET.parse(report).getroot().iter('testcase'):
            failed = any(child.tag in ('failure', 'error') for child in case)
            outcome[case.get('name')] = failed
        os.unlink(report)
        self.assertGreaterEqual(len(outcome), 10)
        passed_anyway = {name for name, failed in outcome.items()
                         if not failed}
        self.assertEqual(FILTER_INDEPENDENT, passed_anyway)
