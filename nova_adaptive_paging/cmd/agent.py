"""``nova-paging-agent``: the compute-node agent (doc/source/agent.rst)."""

import signal
import sys

import libvirt
from oslo_config import cfg
from oslo_log import log as logging
import prometheus_client

from nova_adaptive_paging.agent import domains
from nova_adaptive_paging.agent import service
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.agent import web
from nova_adaptive_paging import conf
from nova_adaptive_paging.conf import adaptive_paging as ap_conf
from nova_adaptive_paging.conf import agent as agent_conf
from nova_adaptive_paging import cpu
from nova_adaptive_paging import exception

CONF = conf.CONF
LOG = logging.getLogger(__name__)

cli_opts = [
    cfg.BoolOpt('once', default=False,
                help='Reconcile and sample once, print what was done and '
                     'each guest\'s state, and exit.'),
]


def _fail(message, code=2):
    print('error: %s' % message, file=sys.stderr)
    sys.exit(code)


def main(argv=None):
    CONF.register_cli_opts(cli_opts)
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
    agent = service.from_conf(CONF, generation)
    try:
        agent.preflight()
    except exception.Error as exc:
        # The host cannot be driven: exit 1 and let systemd retry.
        _fail(str(exc), code=1)
    if CONF.once:
        # One pass needs libvirt: without it the pass would push the
        # host's thresholds and report no guest, and exit 0.
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
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: agent.stop())
    # As OpenStack services do: reload, not die (the default action).
    signal.signal(signal.SIGHUP, lambda *_: agent.request_reload())
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    if CONF.agent.listen_port:
        try:
            web.serve(registry, CONF.agent.listen_address,
                      CONF.agent.listen_port, CONF.agent.web_config_file,
                      timeout=CONF.agent.connection_timeout,
                      max_connections=CONF.agent.max_connections,
                      basic_auth_without_tls=(
                          CONF.agent.basic_auth_without_tls))
        except web.WebConfigError as exc:
            _fail(str(exc))
        except OSError as exc:
            _fail('[agent] listen_address %s, listen_port %d: %s' % (
                CONF.agent.listen_address, CONF.agent.listen_port,
                exc.strerror or exc))
    LOG.info('nova-paging-agent: generation %s, libvirt %s, root %s',
             generation, CONF.adaptive_paging.libvirt_uri,
             CONF.adaptive_paging.host_root)
    agent.run()
    LOG.info('nova-paging-agent: stopped')
    return 0


if __name__ == '__main__':
    sys.exit(main())
