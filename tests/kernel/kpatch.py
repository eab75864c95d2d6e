"""Helpers for tests of the kernel patch series in kvm-patch/patches/."""

import os
import re
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PATCH_DIR = os.path.join(ROOT, 'kvm-patch', 'patches')
SERIES = os.path.join(PATCH_DIR, 'series')
KVM_PATCH = os.path.join(ROOT, 'kvm-patch')
RESULT = re.compile(r'^NAP-RESULT (\S+) (\S+) (PASS|FAIL|SKIP) (\d+) (\d+)')


def run_guest(machine, *args):
    """Boot the built series with kvm-patch/<machine>/run.sh (tcg or
    bochs); its exit status and the guest's NAP- report."""
    proc = subprocess.run([os.path.join(KVM_PATCH, machine, 'run.sh')]
                          + list(args), stdout=subprocess.PIPE, text=True)
    return proc.returncode, proc.stdout


def results(out):
    """(mode, test, PASS|FAIL|SKIP, rc, seconds) of each NAP-RESULT line."""
    return [RESULT.match(line).groups() for line in out.splitlines()
            if RESULT.match(line)]


def series():
    """The patch files of the series, in order, as absolute paths."""
    with open(SERIES) as f:
        names = [line.strip() for line in f]
    return [os.path.join(PATCH_DIR, name) for name in names
            if name and not name.startswith('#')]


def patches_touching(path):
    """The patches of the series that create or change ``path``."""
    marker = 'diff --git a/%s b/%s\n' % (path, path)
    found = []
    for patch in series():
        with open(patch) as f:
            if marker in f.read():
                found.append(patch)
    return found


def extract(paths, dest):
    """Write ``paths`` as the series leaves them, under ``dest``.

    Applies every patch of the series in order with ``git apply``, limited
    to ``paths``, to an empty directory: the files must be created by the
    series (they are new files, not edits of upstream ones), and what is
    compiled is exactly what the series adds.
    """
    git = shutil.which('git')
    if git is None:
        raise RuntimeError('git is needed to apply the patch series')
    dest = os.path.abspath(dest)
    os.makedirs(dest, exist_ok=True)
    # Never let git find a repository above dest: apply as plain patch(1).
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=os.path.dirname(dest))
    for patch in series():
        cmd = [git, 'apply']
        cmd += ['--include=%s' % p for p in paths]
        cmd += ['--exclude=*', patch]
        subprocess.run(cmd, cwd=dest, env=env, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    missing = [p for p in paths if not os.path.exists(os.path.join(dest, p))]
    if missing:
        raise RuntimeError('the series does not create %s' % missing)
    return [os.path.join(dest, p) for p in paths]
