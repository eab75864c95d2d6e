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

"""What the agent says of its configuration beyond oslo.config's own
checks: settings that work but are probably not what was meant (a
misspelt option, an unknown CPU generation, a profile directory that is
not there), and whether the files as they are now would load (SIGHUP).
"""

import configparser
import os

from oslo_config import cfg

from nova_adaptive_paging import conf as conflib
from nova_adaptive_paging.conf import adaptive_paging as ap_conf
from nova_adaptive_paging.conf import agent as agent_conf
from nova_adaptive_paging import cpu
from nova_adaptive_paging import exception
from nova_adaptive_paging import profiles

# The sections whose every option the project defines ([nova] and
# [placement] also take keystoneauth's, which depend on auth_type).
GROUPS = (ap_conf.adaptive_paging_group, agent_conf.agent_group)


def _files(conf):
    return list(getattr(conf, 'config_file', None) or [])


def unknown_options(conf):
    """One line per option of a configuration file that no option of
    :data:`GROUPS` is: oslo.config ignores them in silence."""
    out = []
    for path in _files(conf):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        try:
            parser.read(path, encoding='utf-8')
        except (configparser.Error, UnicodeDecodeError):
            continue                    # oslo.config has said why
        for group in GROUPS:
            if not parser.has_section(group.name):
                continue
            known = list(conf[group.name])
            for key in parser.options(group.name):
                if key in known or key in parser.defaults():
                    continue
                hint = exception.did_you_mean(key, known)
                out.append('%s: [%s] %s: unknown option, ignored%s' % (
                    path, group.name, key, hint and '; ' + hint))
    return out


def warnings(conf, generation):
    """Lines to log at start-up, each saying what is used instead."""
    out = unknown_options(conf)
    ap = conf.adaptive_paging
    if ap.cpu_generation and not cpu.is_generation_key(ap.cpu_generation):
        out.append('[adaptive_paging] cpu_generation %s: not a CPU '
                   'generation this package knows (%s or <vendor>-<family>-'
                   '<model>); only a profile file of that generation '
                   'applies, else the built-in %s thresholds' % (
                       ap.cpu_generation, ', '.join(sorted(
                           cpu.named_keys())[:4]) + ', ...',
                       profiles.FALLBACK_GENERATION))
    for directory in ap.profile_dirs:
        if not os.path.isdir(directory):
            out.append('[adaptive_paging] profile_dirs: %s is not a '
                       'directory; profiles are looked for in the others '
                       'and the built-in ones apply' % directory)
    if ap.decision_samples_dir:
        out.append('[adaptive_paging] decision_samples_dir %s: a test '
                   'hook; with decision = agent, adaptive guests are '
                   'switched on counts read from files there, not on '
                   'their PMU counts' % ap.decision_samples_dir)
    return out


def reloadable(conf):
    """Raise :class:`exception.Error` (one line) unless the configuration
    files as they are now parse and hold valid values: what SIGHUP
    checks before it changes anything."""
    fresh = cfg.ConfigOpts()
    for module in (ap_conf, agent_conf):
        module.register_opts(fresh)
    try:
        fresh([], project='nova-adaptive-paging',
              default_config_files=_files(conf))
        conflib.check_values(fresh, GROUPS)
    except (cfg.Error, ValueError) as exc:
        raise exception.Error('%s: %s' % (', '.join(_files(conf)), exc))
