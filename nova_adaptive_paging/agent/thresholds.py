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

"""The host's thresholds: the profile of its CPU generation, from the
profile directories, written to ``dsp_thresholds``.

The directories are looked at on every pass; files are loaded again only
when one was added, removed or changed (name, size, modification time),
so a profile the Ansible collection drops in takes effect at the next
pass without a restart.  A file that does not load is reported once,
naming file, field and problem, and whatever was in force stays.
"""

import logging
import os

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import profile_files
from nova_adaptive_paging import profiles

LOG = logging.getLogger(__name__)

PARAM = spec.param_path(spec.PARAM_THRESHOLDS)


class HostThresholds:
    def __init__(self, directories, generation):
        self.directories = list(directories)
        self.generation = generation
        self.profiles = profiles.ProfileSet()
        self.errors = []            # ProfileError of the last reload
        self._fingerprint = None
        self._forced = False

    def reconfigure(self, directories):
        """SIGHUP: look in ``directories`` from now on and read every
        file again at the next :meth:`refresh`; a file that no longer
        loads keeps its last good version, as between two passes."""
        self.directories = list(directories)
        self._forced = True

    def _scan(self):
        found = []
        for path in profiles.paths_in(self.directories):
            try:
                st = os.stat(path)
            except OSError:
                continue            # removed since the listing
            found.append((path, st.st_size, st.st_mtime_ns))
        return tuple(found)

    def refresh(self):
        """Reload when the directories changed; return True if they did."""
        fingerprint = self._scan()
        if fingerprint == self._fingerprint and not self._forced:
            return False
        had = self.source if self._fingerprint is not None else None
        self._fingerprint, self._forced = fingerprint, False
        self.errors = self.profiles.reload([p for p, _, _ in fingerprint],
                                           loader=profile_files.load)
        if had is not None and had != self.source and self.missing:
            LOG.warning('%s: gone; %s', had, self.missing)
        return True

    @property
    def missing(self):
        """Why this generation runs on another's thresholds (a warning
        while it lasts, ``profile_missing`` on /metrics), or None."""
        if self.calibrated:
            return None
        return ('no threshold profile for CPU generation %s in %s: the '
                'built-in %s thresholds are in force, uncalibrated for '
                'this host' % (self.generation,
                               ', '.join(self.directories) or '(none)',
                               self.profile.generation))

    @property
    def profile(self):
        return self.profiles.for_generation(self.generation)

    @property
    def source(self):
        return self.profiles.source_of(self.generation)

    @property
    def calibrated(self):
        """Whether this generation has a profile of its own."""
        return self.profiles.has(self.generation)

    def push(self, transport):
        """Write the profile to ``dsp_thresholds`` if the kernel holds
        another set; return True if it wrote."""
        want = spec.ThresholdSet.from_profile(self.profile)
        try:
            have = spec.ThresholdSet.parse(transport.read(PARAM))
        except spec.AbiFormatError:
            have = None
        if have == want:
            return False
        transport.write(PARAM, want.format())
        LOG.info('%s: thresholds of %s written (%s)', PARAM,
                 self.profile.generation, self.source)
        return True
