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

"""``simulate --plot``: the adaptive policy's mode over time (matplotlib)."""

from nova_adaptive_paging import atomic_file
from nova_adaptive_paging import profiles
from nova_adaptive_paging import vocabulary


def backend():
    """matplotlib drawing to files: Agg needs no display, whatever
    MPLBACKEND or DISPLAY say.  ImportError without matplotlib."""
    import matplotlib
    matplotlib.use('Agg', force=True)
    from matplotlib import pyplot
    return pyplot


def draw(path, loaded, timelines, profile):
    """:func:`figure` as a PNG that replaces ``path`` whole."""
    pyplot = backend()
    fig = figure(pyplot, loaded, timelines, profile)
    try:
        atomic_file.atomic_write(path, writer=lambda f: fig.savefig(
            f, format='png', dpi=90), binary=True)
    finally:
        pyplot.close(fig)


def figure(pyplot, loaded, timelines, profile):
    """One panel per trace: FTLB and FPF (log scale) with the thresholds
    (dashed upper, dotted lower), and the mode the adaptive policy ran
    (right axis); one legend, under the panels, names every line."""
    t = profile.thresholds
    fig, axes = pyplot.subplots(len(loaded), 1, squeeze=False,
                                figsize=(10, 3.2 * len(loaded) + 0.6))
    for ax, trace, timeline in zip(axes[:, 0], loaded, timelines):
        times = [p[0] for p in timeline]
        ftlb = [profiles.from_milli(p[2].ftlb) for p in timeline]
        fpf = [profiles.from_milli(p[2].fpf) for p in timeline]
        ax.step(times, ftlb, where='post', color='tab:blue',
                label='FTLB (TLB misses / 1000 insns)')
        ax.step(times, fpf, where='post', color='tab:red',
                label='FPF (faults / 1000 insns x1e7)')
        for name, value, color, style in (
                ('tlb_upper', t.tlb_upper, 'tab:blue', '--'),
                ('tlb_lower', t.tlb_lower, 'tab:blue', ':'),
                ('pf_upper', t.pf_upper, 'tab:red', '--'),
                ('pf_lower', t.pf_lower, 'tab:red', ':')):
            ax.axhline(profiles.from_milli(value), color=color,
                       linestyle=style, linewidth=0.8,
                       label='threshold %s' % name)
        ax.set_yscale('symlog', linthresh=0.01)
        top = max(ftlb + fpf + [profiles.from_milli(t.pf_upper)])
        ax.set_ylim(0, top * 3)
        ax.set_ylabel('FTLB, FPF (log scale)')
        ax.set_title('%s (MODELED)' % trace.name)
        ax.set_xlabel('simulated time (s)')
        mode_ax = ax.twinx()
        mode_ax.step(times, [p[1] for p in timeline], where='post',
                     color='black', label='mode (0 hap, 1 shadow)')
        mode_ax.set_ylim(-0.1, 1.1)
        mode_ax.set_yticks([0, 1], list(vocabulary.MODES))
        mode_ax.set_ylabel('mode')
    # Every panel draws the same lines: one legend for all of them, below
    # the panels, where it hides no sample.
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = mode_ax.get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.6 / fig.get_figheight(), 1, 1))
    fig.legend(lines + more, labels + more_labels, loc='lower center',
               fontsize='small', ncol=4, frameon=False)
    return fig
