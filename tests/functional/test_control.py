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

# What only the filter does (test_scheduling.py): every other test there
# passes without it, placement selecting through the flavors' traits.
FILTER_DEPENDENT_CLASSES = {'TestSafetyNet'}
FILTER_DEPENDENT_TESTS = {'test_without_the_trait_capable_hosts_can_be_missed'}


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
        failed, dependent = set(), set()
        cases = list(ET.parse(report).getroot().iter('testcase'))
        for case in cases:
            name = case.get('name')
            if any(child.tag in ('failure', 'error') for child in case):
                failed.add(name)
            if (case.get('classname').rsplit('.', 1)[-1]
                    in FILTER_DEPENDENT_CLASSES
                    or name in FILTER_DEPENDENT_TESTS):
                dependent.add(name)
        os.unlink(report)
        self.assertGreaterEqual(len(cases), 14)
        self.assertGreaterEqual(len(dependent), 6)
        self.assertEqual(dependent, failed)
