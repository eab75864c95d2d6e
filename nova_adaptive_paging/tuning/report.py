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

"""The profiler's report: one HTML page with PNG plots (matplotlib).

Per generation with a new profile: the sampled FTLB and FPF per mode
against the active and the recommended thresholds, and each held-out
trace's modeled time under both, over the better static mode.  Every
figure built from the cost model says it is modeled.
"""

import html
import io
import os
import tempfile

from nova_adaptive_paging.costmodel import plot
from nova_adaptive_paging import profiles
from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.tuning import profiler
from nova_adaptive_paging import vocabulary

COLORS = {vocabulary.HAP: 'tab:blue', vocabulary.SHADOW: 'tab:orange'}
# The paper's two signals: (name, what it counts in the units of the
# metrics and thresholds).
SIGNALS = {
    'tlb': ('FTLB', 'TLB misses per 1000 guest instructions'),
    'pf': ('FPF', 'guest page faults per 1000 instructions, x 10^7'),
}
# What each histogram's threshold lines are: the recommended ones come
# out of the cost model's replays, never out of a measurement.
THRESHOLD_LINES = ('dotted: active thresholds; solid: recommended, '
                   'MODELED (cost model)')
TICKS = 9           # points: readable at the page's width


def _png(fig, pyplot):
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=90)
    pyplot.close(fig)
    return buf.getvalue()


def _histogram(pyplot, result, metric, prefix, simulated=False):
    """Samples per bucket and mode, thresholds as vertical lines."""
    return _png(_histogram_figure(pyplot, result, metric, prefix,
                                  simulated), pyplot)


def _histogram_figure(pyplot, result, metric, prefix, simulated=False):
    """The histogram's figure; ``simulated``: the samples come from a
    simulated fleet, so they are modeled too."""
    signal, counts_what = SIGNALS[prefix]
    fig, ax = pyplot.subplots(figsize=(7, 3.6))
    hist = result.telemetry.histograms.get(metric.name, {})
    width = 0.4
    labels = None
    for i, mode in enumerate(vocabulary.MODES):
        rows = hist.get(mode, [])
        counts, prev = [], 0.0
        for bound, cum in rows:
            counts.append(max(cum - prev, 0.0))
            prev = cum
        finite = [b for b, _ in rows if b != float('inf')]
        labels = ['<= %g' % b if b != float('inf') else
                  '> %g' % (finite[-1] if finite else 0) for b, _ in rows]
        ax.bar([x + (i - 0.5) * width for x in range(len(counts))], counts,
               width, label='samples in %s' % mode, color=COLORS[mode])
    bounds = [b for b, _ in (hist.get(vocabulary.HAP) or [])]
    # Four labelled lines: each at its own height, so that two thresholds
    # in one bucket never print over each other.
    heights = iter((0.97, 0.74, 0.51, 0.28))
    top = ax.get_ylim()[1]
    for profile, style, name in ((result.active, ':', 'active'),
                                 (result.profile, '-', 'recommended')):
        for edge in ('upper', 'lower'):
            value = profiles.from_milli(
                getattr(profile.thresholds, '%s_%s' % (prefix, edge)))
            x = _position(bounds, float(value))
            ax.axvline(x, linestyle=style, color='black' if name ==
                       'recommended' else 'grey', linewidth=1.2)
            ax.text(x, top * next(heights), ' %s %s %s' % (
                name, edge, value), va='top', fontsize=TICKS - 1,
                bbox={'facecolor': 'white', 'alpha': 0.7, 'linewidth': 0})
    if labels:
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, fontsize=TICKS)
    ax.tick_params(axis='y', labelsize=TICKS)
    ax.set_xlabel('%s: %s (bucket)' % (signal, counts_what),
                  fontsize=TICKS)
    ax.set_ylabel('samples', fontsize=TICKS)
    ax.set_title('%s: sampled %s per mode%s\nlines: %s' % (
        result.generation, signal,
        ' (simulated fleet, MODELED)' if simulated else '',
        THRESHOLD_LINES), fontsize=TICKS)
    ax.legend(fontsize=TICKS - 1)
    fig.tight_layout()
    return fig


def _position(bounds, value):
    """Bucket index (fractional) of ``value`` for the threshold lines."""
    prev = 0.0
    for i, bound in enumerate(bounds):
        if value <= bound:
            span = bound - prev
            return i - 0.5 + ((value - prev) / span if span else 0.5)
        prev = bound
    return len(bounds) - 0.5


def _replay(pyplot, result):
    """Each held-out trace's modeled time over the better static mode."""
    fig, ax = pyplot.subplots(figsize=(7, 3.4))
    names = [s.trace for s in result.new_scores]
    active = {s.trace: s.regret * 100 for s in result.active_scores}
    new = [s.regret * 100 for s in result.new_scores]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [active[n] for n in names], 0.4,
           label='active thresholds', color='grey')
    ax.bar([x + 0.2 for x in xs], new, 0.4, label='recommended',
           color='tab:green')
    ax.axhline(0, color='black', linewidth=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=30, fontsize=TICKS, ha='right')
    ax.tick_params(axis='y', labelsize=TICKS)
    ax.set_xlabel('held-out trace', fontsize=TICKS)
    ax.set_ylabel('regret: % slower than the\nbetter static mode '
                  '(lower is better)', fontsize=TICKS)
    ax.set_title('%s: adaptive on held-out traces (MODELED, estimated '
                 'costs)' % result.generation, fontsize=TICKS + 1)
    ax.legend(fontsize=TICKS - 1)
    fig.tight_layout()
    return _png(fig, pyplot)


# Marks each plot rendered (data-rendered="yes") or says it is missing,
# for the reader and for a browser test that dumps the DOM.
_MARK_PLOTS = (
    '<script>window.addEventListener("load",function(){'
    'document.querySelectorAll("img").forEach(function(i){'
    'var ok=i.complete&&i.naturalWidth>0;i.dataset.rendered=ok?"yes":"no";'
    'if(!ok){var p=document.createElement("p");'
    'p.textContent="plot "+i.getAttribute("src")+" failed to load";'
    'i.after(p);}});});</script>')


def _base_name(base, generation):
    """The shipped cost model the estimate started from, and whether it
    is this generation's own or the fallback."""
    if base.generation == generation:
        return '%s (this generation\'s)' % base.name
    return ('%s, a fallback: none is shipped for %s (%s\'s costs)'
            % (base.name, generation, base.generation))


def _summary(results):
    """What an operator reads first: per generation, what to push, what
    it gains and how sure the estimate is."""
    e = html.escape
    rows = ['<h2>Summary</h2><table><tr><th>generation</th><th>push?</th>'
            '<th>modeled gain</th><th>worst regret, active -&gt; '
            'recommended</th><th>how sure</th></tr>']
    for r in results:
        g = r.telemetry
        sure = '%d hosts, %d guests, %d samples' % (g.hosts, g.guests,
                                                    g.samples)
        if not r.ok:
            rows.append('<tr><td>%s</td><td>no: too little data</td>'
                        '<td>-</td><td>-</td><td>%s</td></tr>'
                        % (e(r.generation), e(sure)))
            continue
        gain = profiler.held_out_gain(r)
        better = r.new_summary.worst_regret <= r.active_summary.worst_regret
        rows.append(
            '<tr><td>%s</td><td>%s</td><td>%s</td><td>%+.2f %% -&gt; '
            '%+.2f %%</td><td>%s</td></tr>' % (
                e(r.generation),
                'yes: %s.yaml' % e(r.generation) if better else
                'no: worse on its worst trace',
                '%+.2f %%' % (gain * 100),
                r.active_summary.worst_regret * 100,
                r.new_summary.worst_regret * 100, e(sure)))
    rows.append('</table>')
    return rows


def _thresholds_row(profile):
    t = profile.to_dict()['thresholds']
    return ' '.join('%s=%s' % (k, t[k]) for k in t) + \
        ' history=%d interval=%d s' % (profile.history_samples,
                                       profile.interval_s)


def render(results, window, url, simulated=False):
    """(HTML text, {file name: PNG bytes}); ``simulated``: the telemetry
    is a simulated fleet's, so every figure is modeled."""
    pyplot = plot.backend()
    pngs = {}
    e = html.escape
    body = ['<h1>Adaptive paging: thresholds per CPU generation</h1>',
            '<p>From %s over the last %s. Costs are estimated from the '
            'kernel\'s overhead counters; every replay is <b>modeled</b> '
            '(cost model, held-out traces).</p>' % (e(url), e(window))]
    body += _summary(results)
    body.append('<h2>Terms</h2><p><b>FTLB</b>: %s. <b>FPF</b>: %s (the seed '
                'paper\'s two signals; P-to-T is FPF over FTLB). '
                '<b>Histograms</b>: the hosts\' samples%s per bucket and '
                'mode; lines %s. '
                '<b>Regret</b>: how much slower adaptive paging is than the '
                'better of the two static modes on a trace (0 %% or less: '
                'never worse). <b>Gain</b>: how much less regret the '
                'recommended thresholds have than the active ones.</p>'
                % (e(SIGNALS['tlb'][1]), e(SIGNALS['pf'][1]),
                   ' (a simulated fleet: MODELED)' if simulated else '',
                   e(THRESHOLD_LINES)))
    for r in results:
        g = r.telemetry
        body.append('<h2>%s</h2>' % e(r.generation))
        body.append('<p>%d hosts, %d guests, %d samples.</p>'
                    % (g.hosts, g.guests, g.samples))
        if not r.ok:
            body.append('<p class="insufficient"><b>Too little data, no '
                        'profile:</b> %s</p>' % e(r.reason))
            continue
        c, base = r.costs, r.base
        miss, fault = vocabulary.EVENT_TLB_MISS, vocabulary.EVENT_PAGE_FAULT
        body.append(
            '<table><tr><th>per event</th><th>estimated</th><th>shipped '
            'model: %s</th></tr>'
            '<tr><td>page fault, shadow over hap</td><td>%.4g us</td>'
            '<td>%.4g us</td></tr>'
            '<tr><td>TLB miss, hap over shadow</td><td>%.4g ns</td>'
            '<td>%.4g ns</td></tr>'
            '<tr><td>switch (mean)</td><td>%.4g us</td><td>-</td></tr>'
            '</table><p>TLB miss: %s.</p>' % (
                e(_base_name(base, r.generation)), c.fault_s * 1e6,
                base.extra_cost_s(vocabulary.SHADOW, fault) * 1e6,
                profiler.extra_miss_s(r.hardware) * 1e9,
                base.extra_cost_s(vocabulary.HAP, miss) * 1e9,
                c.switch_s * 1e6, e(c.miss_note)))
        body.append('<p>Active: <code>%s</code><br>Recommended: '
                    '<code>%s</code></p>' % (e(_thresholds_row(r.active)),
                                             e(_thresholds_row(r.profile))))
        body.append('<p>Held-out traces (modeled): worst regret %+.2f %% '
                    'active, %+.2f %% recommended.</p>'
                    % (r.active_summary.worst_regret * 100,
                       r.new_summary.worst_regret * 100))
        for name, data in (
                ('ftlb', _histogram(pyplot, r, M.SAMPLED_FTLB, 'tlb',
                                    simulated)),
                ('fpf', _histogram(pyplot, r, M.SAMPLED_FPF, 'pf',
                                   simulated)),
                ('replay', _replay(pyplot, r))):
            fname = '%s-%s.png' % (r.generation, name)
            pngs[fname] = data
            body.append('<img src="%s" alt="%s %s">' % (e(fname),
                                                        e(r.generation),
                                                        name))
    page = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>'
            'nova-paging profile</title><style>body{font-family:sans-serif;'
            'max-width:60em;margin:2em auto}td,th{padding:0 1em;text-align:'
            'left}img{display:block;margin:1em 0}</style></head><body>%s'
            '%s</body></html>\n' % ('\n'.join(body), _MARK_PLOTS))
    return page, pngs


def write(out, results, window, url, simulated=False):
    """The report, its plots and a profile per generation with one,
    into ``out``: all or nothing (staged there, then renamed)."""
    page, pngs = render(results, window, url, simulated)
    files = {'report.html': page.encode()}
    files.update(pngs)
    for r in results:
        if r.ok:
            files['%s.yaml' % r.generation] = r.profile.dump().encode()
    os.makedirs(out, exist_ok=True)
    stage = tempfile.mkdtemp(prefix='.nova-paging-profile-', dir=out)
    try:
        for name, data in files.items():
            with open(os.path.join(stage, name), 'wb') as f:
                f.write(data)
        for name in files:
            os.replace(os.path.join(stage, name), os.path.join(out, name))
    finally:
        for name in os.listdir(stage):
            os.unlink(os.path.join(stage, name))
        os.rmdir(stage)
    return os.path.join(out, 'report.html')
