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

"""``nova-paging simulate`` and ``nova-paging calibrate`` (modeled)."""

import json

import click

from nova_adaptive_paging.cmd import common
from nova_adaptive_paging import atomic_file
from nova_adaptive_paging import profiles
from nova_adaptive_paging import costmodel
from nova_adaptive_paging.tuning import assess
from nova_adaptive_paging.tuning import derivation
from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces


HARDWARE_HELP = ('Hardware cost profile: a shipped name (%s), a CPU '
                 'generation of the simulated fleet (the demo\'s; invented '
                 'costs) or a file.' % ', '.join(hardware.builtin_names()))


@click.command('simulate')
@click.option('--trace', 'trace_paths', multiple=True,
              type=click.Path(dir_okay=False), help='Workload trace: a CSV '
              'file or a shipped trace\'s name (gcc, mcf, phases-tlb-fault, '
              '...); repeat for several.  Further trace files may follow as '
              'arguments, so that --trace traces/*.csv works.')
@click.argument('more_traces', nargs=-1, type=click.Path(dir_okay=False))
# Required, but checked after the traces: a misspelled trace is said at
# once, not after --hardware has been added.
@click.option('--hardware', 'hw_name', help=HARDWARE_HELP + '  Required.')
@click.option('--thresholds', type=click.Path(dir_okay=False),
              help='Threshold profile file (default: the built-in '
                   'profile).')
@click.option('--interval', type=click.FloatRange(min=0.1),
              help='Sampling interval in seconds (default: the threshold '
                   'profile\'s).')
@click.option('--no-guest-faults', is_flag=True,
              help='Model a VM without a guest fault counter: in HAP mode '
                   'the policy sees no page faults.')
@click.option('--json', 'as_json', is_flag=True, help='Print JSON.')
@click.option('--plot', type=click.Path(dir_okay=False),
              help='Draw mode, FTLB and FPF over time to this PNG.')
def simulate(trace_paths, more_traces, hw_name, thresholds, interval,
             no_guest_faults, as_json, plot):
    """Replay traces under hap, shadow, adaptive and oracle (modeled)."""
    trace_paths = trace_paths + more_traces
    if not trace_paths:
        common.fail('give at least one --trace FILE')
    loaded = [traces.resolve(p) for p in trace_paths]
    if not hw_name:
        common.fail('--hardware: missing; expected a shipped profile (%s) '
                    'or a file' % ', '.join(hardware.builtin_generations()))
    hw = common.resolve_hardware(hw_name)
    profile = (profiles.load(thresholds) if thresholds
               else profiles.builtin())
    if plot:
        atomic_file.check_writable(plot)
        try:
            from nova_adaptive_paging.costmodel import plot as plotting
            plotting.backend()
        except ImportError:
            common.fail('--plot needs matplotlib (pip install matplotlib)')
    results, timelines = [], []
    for trace in loaded:
        timeline = [] if plot else None
        results.append(evaluator.evaluate(
            trace, hw, profile, interval, guest_faults=not no_guest_faults,
            timeline=timeline))
        timelines.append(timeline)
    if plot:
        plotting.draw(plot, loaded, timelines, profile)
    click.echo(costmodel.MODELED_NOTE, err=True)
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    click.echo('MODELED execution times (s) on hardware profile %s, '
               'thresholds %s, interval %g s'
               % (hw.name, thresholds or 'built-in (%s)'
                  % profile.generation, interval or profile.interval_s))
    click.echo('%-22s %10s %10s %10s %5s %10s %5s %9s %9s' % (
        'trace', 'hap', 'shadow', 'adaptive', 'sw', 'oracle', 'sw',
        'vs static', 'vs oracle'))
    for r in results:
        p = r['policies']
        vs_static, vs_oracle = evaluator.regret(r)
        click.echo('%-22s %10.1f %10.1f %10.1f %5d %10.1f %5d %+8.2f%% '
                   '%+8.2f%%' % (
                       r['trace'][:22], p['hap']['time_s'],
                       p['shadow']['time_s'], p['adaptive']['time_s'],
                       p['adaptive']['switches'], p['oracle']['time_s'],
                       p['oracle']['switches'], vs_static * 100,
                       vs_oracle * 100))


@click.command('calibrate')
@click.option('--hardware', 'hw_names', required=True, multiple=True,
              help=HARDWARE_HELP + '  Repeat with --compare.')
@click.option('--out', type=click.Path(dir_okay=False),
              help='Threshold profile file to write.')
@click.option('--trace', 'trace_paths', multiple=True,
              type=click.Path(dir_okay=False),
              help='Traces to choose the free factors over (default: the '
                   'shipped tuning traces).')
@click.option('--interval', type=click.IntRange(1, 60),
              help='Sampling interval (s) (default: searched).')
@click.option('--generation', help='Generation key written to the profile '
              '(default: the hardware profile\'s).')
@click.option('--compare', is_flag=True,
              help='Write nothing; print how thresholds calibrated for each '
                   '--hardware, the paper\'s Table 2 and each --thresholds '
                   'file do on every --hardware\'s costs.')
@click.option('--thresholds', 'threshold_paths', multiple=True,
              type=click.Path(dir_okay=False),
              help='With --compare: a threshold profile to include.')
def calibrate(hw_names, out, trace_paths, interval, generation, compare,
              threshold_paths):
    """Derive DSP thresholds from a hardware profile's costs (modeled)."""
    hws = [common.resolve_hardware(name) for name in hw_names]
    if compare:
        return _compare(hws, trace_paths, interval, threshold_paths)
    if len(hws) != 1 or not out:
        common.fail('give one --hardware and --out FILE (several --hardware '
                    'go with --compare)')
    if threshold_paths:
        common.fail('--thresholds goes with --compare')
    hw = hws[0]
    atomic_file.check_writable(out)       # before the search
    loaded = ([traces.resolve(p) for p in trace_paths] if trace_paths
              else derivation.tuning_traces())
    try:
        profile, report = derivation.calibrate(hw, loaded, interval,
                                               generation)
    except ValueError as exc:
        common.fail(str(exc))
    text = ('# Threshold profile derived by nova-paging calibrate from '
            'the MODELED\n# costs of hardware profile %s.\n' % hw.name
            + profile.dump())
    profiles.loads(text, out)        # never write what cannot be loaded
    atomic_file.atomic_write(out, text)
    capture = ('' if report['worst_capture'] is None else
               '; at least %.0f %% of the oracle\'s gain'
               % (report['worst_capture'] * 100))
    click.echo('%s: break-even P-to-T %.4g; interval %d s, history %d; '
               'worst %+.2f %%, mean %+.2f %% from the better static mode%s '
               'over %d traces (modeled)' % (
                   out, report['break_even_pt'], report['interval_s'],
                   report['history'], report['worst_regret'] * 100,
                   report['mean_regret'] * 100, capture, report['traces']))


def _compare(hws, trace_paths, interval, threshold_paths):
    tuning = ([traces.resolve(p) for p in trace_paths] if trace_paths
              else derivation.tuning_traces())
    sources = []
    for hw in hws:
        try:
            choice = derivation.search(hw, tuning, interval)
        except ValueError as exc:
            common.fail(str(exc))
        sources.append(('calibrated for %s' % hw.name, profiles.Profile(
            hw.generation, choice.thresholds, choice.history,
            choice.interval_s, profiles.Provenance('calibrated'))))
    sources.append(('paper Table 2', profiles.builtin()))
    for path in threshold_paths:
        sources.append((path, profiles.load(path)))
    table = assess.cross_table(hws, sources, derivation.held_out_traces())
    click.echo(costmodel.MODELED_NOTE, err=True)
    click.echo('MODELED: thresholds (rows) on each hardware profile\'s costs '
               '(columns), over the held-out traces: worst share of the '
               'oracle\'s gain captured on phase-changing traces, worst '
               'regret against the better static mode, switches beyond the '
               'oracle\'s on steady traces; * misses the goal (>= %.0f %%, '
               '<= %.0f %%, none)' % (assess.GOAL_CAPTURE * 100,
                                      assess.GOAL_REGRET * 100))
    for line in assess.format_table([hw.name for hw in hws], table):
        click.echo(line)
