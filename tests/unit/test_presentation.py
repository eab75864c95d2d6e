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

"""What an operator reads: the profiler report's text and histograms,
``simulate --plot``'s figure and ``calibrate --compare``'s table."""

import re

from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import plot
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import profiles
from nova_adaptive_paging.telemetry import generation_aggregates
from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.tuning import assess
from nova_adaptive_paging.tuning import profiler
from nova_adaptive_paging.tuning import report

INF = float('inf')


def test_the_reports_terms_define_each_signal_once():
    page, pngs = report.render([], '30m', 'http://prometheus:9090')
    assert pngs == {}
    terms = page.split('<h2>Terms</h2>', 1)[1]
    assert '<b>FTLB</b>: TLB misses per 1000 guest instructions.' in terms
    assert '<b>FPF</b>: guest page faults per 1000 instructions' in terms
    # The name is not repeated as its own definition.
    assert not re.search(r'<b>(FTLB|FPF)</b>: \1', page)
    # The threshold lines say which are modeled.
    assert 'solid: recommended, MODELED' in terms
    assert 'simulated' not in terms
    page, _ = report.render([], '30m', 'demo', simulated=True)
    assert "samples (a simulated fleet: MODELED)" in page


def _result():
    g = generation_aggregates.Generation('amd-zen3')
    g.histograms[M.SAMPLED_FTLB.name] = {
        'hap': [(0.1, 3.0), (1, 10.0), (INF, 12.0)],
        'shadow': [(0.1, 1.0), (1, 2.0), (INF, 8.0)]}
    return profiler.Result('amd-zen3', g, active=profiles.builtin(),
                           profile=profiles.builtin())


def test_a_histogram_says_what_is_modeled():
    pyplot = plot.backend()
    for simulated in (False, True):
        fig = report._histogram_figure(pyplot, _result(), M.SAMPLED_FTLB,
                                       'tlb', simulated)
        try:
            (ax,) = fig.axes
            title = ax.get_title()
            assert 'solid: recommended, MODELED' in title
            assert ('simulated fleet, MODELED' in title) == simulated
            assert ax.get_xlabel().startswith(
                'FTLB: TLB misses per 1000 guest instructions')
            assert ax.get_ylabel() == 'samples'
            # Bars of both modes, from the cumulative buckets.
            heights = [p.get_height() for p in ax.patches]
            assert heights == [3.0, 7.0, 2.0, 1.0, 1.0, 6.0]
        finally:
            pyplot.close(fig)


def test_the_mode_plot_labels_its_axes_and_names_every_threshold_line():
    trace = traces.resolve('phases-tlb-fault')
    profile = profiles.builtin()
    timeline = []
    evaluator.evaluate(trace, hardware.resolve('nehalem'), profile, None,
                       timeline=timeline)
    pyplot = plot.backend()
    fig = plot.figure(pyplot, [trace], [timeline], profile)
    try:
        signals, modes = fig.axes
        assert signals.get_ylabel() and modes.get_ylabel() == 'mode'
        # One legend for the figure, none hiding a panel's samples.
        assert signals.get_legend() is None and modes.get_legend() is None
        [legend] = fig.legends
        labels = [t.get_text() for t in legend.get_texts()]
        t = profile.thresholds
        expected = {'threshold %s' % name: profiles.from_milli(
            getattr(t, name)) for name in ('tlb_upper', 'tlb_lower',
                                           'pf_upper', 'pf_lower')}
        assert set(expected) <= set(labels)
        assert 'mode (0 hap, 1 shadow)' in labels
        # Each named line is at its threshold.
        for line in signals.get_lines():
            if line.get_label() in expected:
                assert float(line.get_ydata()[0]) == float(
                    expected[line.get_label()])
    finally:
        pyplot.close(fig)


def _summary(capture, regret, switches=0):
    return assess.Summary(worst_regret=regret, mean_regret=regret,
                          worst_capture=capture, median_capture=capture,
                          excess_switches=switches, traces=10)


def test_the_compare_tables_columns_line_up():
    table = [
        ('calibrated for nehalem', [_summary(0.99, 0.004),
                                    _summary(0.98, 0.006)]),
        ('a much longer label than the others', [
            _summary(None, -0.1), _summary(0.5, 0.123, switches=10)]),
        ('paper Table 2', [_summary(0.95, 0.004),
                           _summary(0.93, 0.006, switches=112)]),
    ]
    lines = assess.format_table(['nehalem', 'sapphirerapids-5lp'], table)
    assert len(lines) == 4
    header, rows = lines[0], lines[1:]
    starts = [header.index('nehalem'), header.index('sapphirerapids-5lp')]
    cells = [[line[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
             for line in rows]
    assert cells[0] == ['99%  +0.4%', '98%  +0.6%']
    assert cells[2][1] == '93%  +0.6% +112sw *'
    # Every part of a cell sits under the same part above it: the end of
    # the capture, of the regret, of the switches; the star.
    for start in starts:
        ends = {tuple(m.end() for m in re.finditer(
            r'\S+', line[start:start + 20]))[:2] for line in rows}
        assert len(ends) == 1, lines
    assert len({line.index('*') for line in rows if '*' in line}) == 1
    assert len({re.search(r'\+\d+sw', line).start() for line in rows
                if 'sw' in line}) == 1
