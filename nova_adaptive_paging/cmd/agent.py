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

"""``nova-paging-agent``: the compute-node agent (doc/source/agent.rst).

The signal handlers come first, before any slow import: a SIGHUP that
arrives while the agent starts is a reload to do once it runs, not the
end of the process (SIGHUP's default action), and a SIGTERM ends the
start-up at once.  The loop then runs in a thread of its own and the
main thread only serves signals, so a call that never returns cannot
hold a stop: after ``[agent] stop_timeout`` the agent exits anyway,
saying what the loop was doing.
"""

import signal
import sys

SIGNAL_POLL_S = 0.25
# The host lock's file, held open until the process ends.
_HELD = []


class _StartUpStopped(BaseException):
    """SIGTERM or SIGINT while the agent starts."""


class _Signals:
    """Installed first thing: flags until the agent exists, then the
    agent's own requests (which take no lock: see Agent.stop)."""

    def __init__(self):
        self.agent = None
        self.reload = False
        self.stopping = False
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._stop)
        # As OpenStack services do: reload, not die (the default action).
        signal.signal(signal.SIGHUP, self._hup)

    def _stop(self, signum, frame):
        self.stopping = True
        if self.agent is None or not self.agent.running:
            raise _StartUpStopped()
        self.agent.stop()

    def _hup(self, signum, frame):
        if self.agent is None:
            self.reload = True          # done once the loop runs
        else:
            self.agent.request_reload()

    def attach(self, agent):
        self.agent = agent
        if self.reload:
            agent.request_reload()


def _fail(message, code=2):
    print('error: %s' % message, file=sys.stderr)
    sys.exit(code)


def main(argv=None):
    signals = _Signals()
    try:
        return _main(signals, argv)
    except _StartUpStopped:
        print('nova-paging-agent: stopped while starting', file=sys.stderr)
        return 0


def _main(signals, argv):
    import os
    import threading

    from oslo_config import cfg
    from oslo_log import log as logging
    import prometheus_client

    from nova_adaptive_paging.agent import host_lock
    from nova_adaptive_paging.agent import service
    from nova_adaptive_paging.agent import web
    from nova_adaptive_paging import conf
    from nova_adaptive_paging.conf import adaptive_paging as ap_conf
    from nova_adaptive_paging.conf import agent as agent_conf
    from nova_adaptive_paging import cpu
    from nova_adaptive_paging import exception
    from nova_adaptive_paging.telemetry import collector

    CONF = conf.CONF
    LOG = logging.getLogger(__name__)
    CONF.register_cli_opts([
        cfg.BoolOpt('once', default=False,
                    help='Reconcile and sample once, print what was done '
                         'and each guest\'s state, and exit.'),
    ])
    logging.register_options(CONF)
    # stdout carries --once's report; the log goes to stderr (the
    # journal under systemd) unless a log file is configured.
    CONF.set_default('use_stderr', True)
    try:
        CONF(sys.argv[1:] if argv is None else argv,
             project='nova-adaptive-paging', prog='nova-paging-agent',
             default_config_files=[])
        conf.check_values(CONF, (ap_conf.adaptive_paging_group,
                                 agent_conf.agent_group))
    except Exception as exc:  # oslo.config's errors share no base class
        _fail('configuration: %s' % exc)
    logging.setup(CONF, 'nova-adaptive-paging')
    try:
        generation = (CONF.adaptive_paging.cpu_generation
                      or cpu.host_generation(cpu.cpuinfo_path(
                          CONF.adaptive_paging.host_root)))
    except (OSError, ValueError) as exc:
        _fail('cannot read the host CPU: %s (set [adaptive_paging] '
              'cpu_generation)' % exc)
    try:
        # Held until the process ends: one agent per host.
        _HELD.append(host_lock.acquire(CONF.adaptive_paging.host_root,
                                       CONF.agent.lock_file))
    except host_lock.Held as exc:
        _fail(str(exc), code=1)
    agent = service.from_conf(CONF, generation)
    signals.attach(agent)
    try:
        agent.preflight()
    except exception.Error as exc:
        # The host cannot be driven: exit 1 and let systemd retry.
        _fail(str(exc), code=1)
    if CONF.once:
        # One pass needs libvirt: without it the pass would push the
        # host's thresholds and report no guest, and exit 0.
        import libvirt
        from nova_adaptive_paging.agent import domains
        try:
            agent.domains.connect()
        except domains.LibvirtUnavailable as exc:
            cause = exc.__context__
            _fail('[adaptive_paging] libvirt_uri %s: %s; nothing done' % (
                CONF.adaptive_paging.libvirt_uri,
                cause.get_error_message()
                if isinstance(cause, libvirt.libvirtError) else exc),
                code=1)
        agent.reconcile()
        agent.sample()
        for line in agent.report():
            print(line)
        agent.domains.close()
        return 0
    registry = prometheus_client.CollectorRegistry()
    metrics = collector.Collector(agent)
    registry.register(metrics)
    if CONF.agent.listen_port:
        try:
            web.serve(registry, CONF.agent.listen_address,
                      CONF.agent.listen_port, CONF.agent.web_config_file,
                      timeout=CONF.agent.connection_timeout,
                      max_connections=CONF.agent.max_connections,
                      basic_auth_without_tls=(
                          CONF.agent.basic_auth_without_tls),
                      render=metrics.render)
        except web.WebConfigError as exc:
            _fail(str(exc))
        except OSError as exc:
            _fail('[agent] listen_address %s, listen_port %d: %s' % (
                CONF.agent.listen_address, CONF.agent.listen_port,
                exc.strerror or exc))
        agent.render_metrics = True
    LOG.info('nova-paging-agent: generation %s, libvirt %s, root %s',
             generation, CONF.adaptive_paging.libvirt_uri,
             CONF.adaptive_paging.host_root)
    loop = threading.Thread(target=agent.run, name='agent-loop',
                            daemon=True)
    agent.running = True
    if signals.stopping:
        raise _StartUpStopped()
    loop.start()
    # The main thread serves signals only: its handlers run between two
    # of these sleeps, whatever the loop is blocked in.
    while loop.is_alive() and not signals.stopping:
        loop.join(SIGNAL_POLL_S)
    loop.join(CONF.agent.stop_timeout)
    if loop.is_alive():
        LOG.error('nova-paging-agent: the loop did not end within [agent] '
                  'stop_timeout (%.0f s) while in %s; exiting without it',
                  CONF.agent.stop_timeout, agent.doing)
        logging_flush()
        os._exit(1)
    LOG.info('nova-paging-agent: stopped')
    return 0


def logging_flush():
    import logging as stdlib_logging
    for handler in stdlib_logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:           # a broken handler: nothing to save
            pass


if __name__ == '__main__':
    sys.exit(main())
