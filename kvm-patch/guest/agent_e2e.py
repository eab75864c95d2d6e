"""The agent on the patched kernel, end to end (guest/init, nap.agent=1).

Runs in the emulated host, in the Debian root that tcg/run.sh --agent
prepared (Debian's libvirt, QEMU and the agent's Python dependencies,
this checkout's nova_adaptive_paging under /opt/nap): starts libvirtd
(Debian 12 ships no modular daemons), starts from /opt/nap-e2e two
domains whose XML Nova's own classes wrote (tests/kernel/agent_inputs.py),
one with hw:paging=shadow and one with adaptive, each a real QEMU/KVM
guest (guest/l2-pager.S), and the agent with a threshold profile in its
profile directory.  It prints what it saw as "NAP-AGENT ..." lines;
tests/kernel/test_tcg_selftests.py judges them.
"""

import glob
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.host import vmfd

E2E = '/opt/nap-e2e'
RUN = '/run/nap'
SOCKET = '/run/libvirt/libvirt-sock'
URI = 'qemu:///system?socket=' + SOCKET
PORT = 9782


def say(*words):
    print('NAP-AGENT', *words, flush=True)


def wait_for(what, timeout, step=0.5):
    end = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > end:
            return value
        time.sleep(step)


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def vm_dir(domain):
    """The domain's per-VM directory: its QEMU pid from libvirt's pid
    file, as the interface spec maps them."""
    pid = read('/run/libvirt/qemu/%s.pid' % domain)
    if not pid:
        return None
    dirs = glob.glob('/%s/%s-*/%s' % (spec.DEBUGFS_DIR, pid,
                                      spec.FILE_POLICY))
    return os.path.dirname(dirs[0]) if dirs else None


def vm_state(domain):
    d = vm_dir(domain)
    if d is None:
        return None, None
    return (read(os.path.join(d, spec.FILE_POLICY)),
            read(os.path.join(d, spec.FILE_MODE)))


def virsh(*args):
    return subprocess.run(['virsh', '-c', URI] + list(args),
                          capture_output=True, text=True, timeout=600)


def start_domain(name):
    t0 = time.monotonic()
    r = virsh('create', os.path.join(E2E, name + '.xml'))
    say('create', name, 'rc=%d' % r.returncode,
        'seconds=%.1f' % (time.monotonic() - t0),
        (r.stdout + r.stderr).strip().replace('\n', ' | '))
    if r.returncode:
        libvirtd_logs()
        return False
    wait_for(lambda: vm_dir(name), 120)
    policy, mode = vm_state(name)
    say('started', name, 'policy=%s' % policy, 'mode=%s' % mode)
    return True


def start_libvirtd():
    daemon = subprocess.Popen(['libvirtd', '-f',
                               os.path.join(RUN, 'libvirtd.conf')],
                              stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(RUN, 'libvirtd.err'),
                                          'a'))
    if not wait_for(lambda: os.path.exists(SOCKET), 120):
        say('error libvirtd did not start')
        libvirtd_logs()
        return None
    return daemon


def libvirtd_logs():
    for name in ('libvirtd.err', 'libvirtd.log'):
        for line in (read(os.path.join(RUN, name)) or '').splitlines():
            say('log', name, line)


def agent_log_lines(*texts):
    """How many lines of the agent's log say each of ``texts``."""
    with open(os.path.join(RUN, 'agent.log'), errors='replace') as f:
        return sum(all(t in line for t in texts) for line in f)


def connects():
    """How often the agent has connected to libvirt, from its log."""
    return agent_log_lines('connected to libvirt at')


def vcpu_stat(domain, name):
    """A vCPU statistic of the domain's VM, summed over its vCPUs (KVM's
    debugfs file of that name in the VM's directory)."""
    d = vm_dir(domain)
    return read(os.path.join(d, name)) if d else None


def part1_view(domain):
    """What the agent reads on a kernel with part 1 alone, read here on
    the whole series through the agent's own transport: the domain's
    vCPUs in shadow mode and in all (their paging_shadow statistic, which
    debugfs sums in the VM's directory, and its vcpu<N> directories), and
    whether KVM_CHECK_EXTENSION offers KVM_SET_PAGING_MODE."""
    d = vm_dir(domain)
    if not d:
        return 'vcpus_shadow=- cap=-'
    host = vmfd.VmFdTransport('/')
    try:
        shadow, count = host.vcpus_in_shadow(os.path.basename(d))
        cap = int(host.paging_mode_cap())
    except OSError as exc:
        return 'vcpus_shadow=error:%s cap=-' % (exc.strerror or exc)
    return 'vcpus_shadow=%d/%d cap=%d' % (shadow, count, cap)


def decide_in_the_agent(agent, conf, domain):
    """decision = agent, as for a kernel with the mechanism alone: after a
    SIGHUP the agent runs the DSP engine on the adaptive guest's counts,
    which come from decision_samples_dir (no PMU under TCG, as the
    kernel's dsp_inject), and switches the guest through the mechanism's
    control, KVM_SET_PAGING_MODE on the VM's descriptor, which its log
    names.  TLB-bound counts, then fault-bound ones; what the guest's
    vCPU runs in is its own statistic, paging_shadow."""
    samples = os.path.join(RUN, 'samples')
    os.makedirs(samples, exist_ok=True)
    counts = [0, 0, 0]

    def feed(tlb, faults):
        counts[0] += 10 ** 9
        counts[1] += tlb
        counts[2] += faults
        with open(os.path.join(samples, domain + '.tmp'), 'w') as f:
            f.write('%d %d %d\n' % tuple(counts))
        os.rename(os.path.join(samples, domain + '.tmp'),
                  os.path.join(samples, domain))

    feed(0, 0)
    with open(conf) as f:
        text = f.read()
    if '[adaptive_paging]\n' not in text or agent.poll() is not None:
        say('error decision: no [adaptive_paging] section, or no agent')
        return
    with open(conf, 'w') as f:
        f.write(text.replace('[adaptive_paging]\n', '[adaptive_paging]\n'
                             'decision = agent\ndecision_samples_dir = %s\n'
                             % samples, 1))
    agent.send_signal(signal.SIGHUP)
    for phase, tlb, faults, mode, shadow in (
            ('tlb-bound', 10 ** 8, 0, 'shadow', '1'),
            ('fault-bound', 0, 10 ** 6, 'hap', '0')):
        t0 = time.monotonic()

        def there():
            if agent.poll() is not None:
                return True         # gone: nothing more will change
            feed(tlb, faults)
            policy, now = vm_state(domain)
            return (policy == mode and now == mode
                    and vcpu_stat(domain, 'paging_shadow') == shadow)
        wait_for(there, 300)
        policy, now = vm_state(domain)
        say('decided', phase, domain, 'policy=%s' % policy, 'mode=%s' % now,
            'paging_shadow=%s' % vcpu_stat(domain, 'paging_shadow'),
            'paging_switches=%s' % vcpu_stat(domain, 'paging_switches'),
            part1_view(domain),
            'by_ioctl=%d' % agent_log_lines(
                domain + ' (instance', 'switched it to %s (rule' % mode,
                ') through KVM_SET_PAGING_MODE'),
            'seconds=%.1f' % (time.monotonic() - t0))


def main():
    t_start = time.monotonic()
    with open(os.path.join(E2E, 'inputs.json')) as f:
        inputs = json.load(f)
    os.makedirs(RUN, exist_ok=True)
    os.makedirs(os.path.join(RUN, 'profiles'), exist_ok=True)
    for name in inputs['profiles']:
        with open(os.path.join(E2E, name)) as src, \
                open(os.path.join(RUN, 'profiles', name), 'w') as dst:
            dst.write(src.read())
    with open(os.path.join(RUN, 'libvirtd.conf'), 'w') as f:
        f.write('auth_unix_rw = "none"\nauth_unix_ro = "none"\n'
                'log_outputs = "2:file:%s/libvirtd.log"\n' % RUN)
    conf = os.path.join(RUN, 'agent.conf')
    with open(conf, 'w') as f:
        f.write(inputs['agent_conf'].format(uri=URI, run=RUN, port=PORT,
                                            conf=conf))

    daemon = start_libvirtd()
    if daemon is None:
        return 1
    say('libvirtd up', 'seconds=%.1f' % (time.monotonic() - t_start))

    guests = inputs['guests']          # domain name -> instance uuid
    first, second = list(guests)
    if not start_domain(first):
        return 1

    env = dict(os.environ, PYTHONPATH='/opt/nap',
               PYTHONDONTWRITEBYTECODE='1')
    agent_log = open(os.path.join(RUN, 'agent.log'), 'w')
    agent = subprocess.Popen(
        [sys.executable, '-c', 'import sys; from nova_adaptive_paging.cmd '
         'import agent; sys.exit(agent.main())', '--config-file', conf],
        env=env, stdout=agent_log, stderr=subprocess.STDOUT)

    def wanted(name):
        if agent.poll() is not None:
            return True             # gone: nothing more will change
        policy, mode = vm_state(name)
        want = inputs['expect'][name]
        return policy == want['policy'] and (
            want.get('mode') is None or mode == want['mode'])

    # Generous waits: under TCG the agent's first pass took 145 s (Python
    # and its privsep daemon start slowly); they cost time only on failure.
    t0 = time.monotonic()
    wait_for(lambda: wanted(first), 600)
    policy, mode = vm_state(first)
    say('vm', first, 'policy=%s' % policy, 'mode=%s' % mode,
        'seconds=%.1f' % (time.monotonic() - t0))

    # libvirtd restarted under the agent (QEMU keeps running): the agent
    # reconnects, the guest keeps its mode, and a guest started after the
    # restart is found.
    wait_for(lambda: connects() >= 1, 300)
    before = connects()
    daemon.terminate()
    daemon.wait(60)
    say('libvirtd stopped')
    time.sleep(2)
    daemon = start_libvirtd()
    if daemon is None:
        return 1
    wait_for(lambda: connects() > before, 300)
    policy, mode = vm_state(first)
    say('after-restart', first, 'policy=%s' % policy, 'mode=%s' % mode,
        'connects=%d' % connects(), 'before=%d' % before)

    if start_domain(second):
        t0 = time.monotonic()
        wait_for(lambda: wanted(second), 300)
        policy, mode = vm_state(second)
        say('vm', second, 'policy=%s' % policy, 'mode=%s' % mode,
            'seconds=%.1f' % (time.monotonic() - t0))
    say('thresholds', read('/%s/%s' % (spec.PARAMS_DIR,
                                       spec.PARAM_THRESHOLDS)) or '-')
    decide_in_the_agent(agent, conf, second)

    # Two intervals more: samples to report, then the scrape.
    time.sleep(3)
    try:
        with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % PORT,
                                    timeout=60) as r:
            text = r.read().decode()
        for line in text.splitlines():
            if line.startswith('nova_paging_'):
                say('metric', line)
    except OSError as exc:
        say('error scrape: %s' % exc)

    for name in guests:
        with open('/run/nap/%s.serial' % name, errors='replace') as f:
            say('serial', name, f.read().strip().replace('\n', ' | '))

    agent.send_signal(signal.SIGTERM)
    try:
        rc = agent.wait(60)
    except subprocess.TimeoutExpired:
        agent.kill()
        rc = 'hung'
    say('agent-exit', rc)
    agent_log.close()
    with open(os.path.join(RUN, 'agent.log'), errors='replace') as f:
        lines = f.read().splitlines()
    # Its first lines, then its warnings and errors, each once.
    seen = set()
    for line in lines[:10] + [x for x in lines[10:] if ' INFO ' not in x]:
        text = line.split(' ', 4)[-1]
        if text not in seen:
            seen.add(text)
            say('log', line)
    for name in guests:
        virsh('destroy', name)
    daemon.terminate()
    daemon.wait(30)
    say('done', 'seconds=%.1f' % (time.monotonic() - t_start))
    return 0


if __name__ == '__main__':
    sys.exit(main())
