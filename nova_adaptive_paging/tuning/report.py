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
from nova_adaptive_paging import vocabulary

COLORS = {vocabulary.HAP: 'tab:blue', vocabulary.SHADOW: 'tab:orange'}


def _png(fig, pyplot):
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=90)
    pyplot.close(fig)
    return buf.getvalue()


def _histogram(pyplot, result, metric, prefix, unit):
    """Samples per bucket and mode, thresholds as vertical lines."""
    fig, ax = pyplot.subplots(figsize=(7, 3.4))
    hist = result.telemetry.histograms.get(metric.name, {})
    width = 0.4
    labels = None
    for i, mode in enumerate(vocabulary.MODES):
        rows = hist.get(mode, [])
        counts, prev = [], 0.0
        for bound, cum in rows:
            counts.append(max(cum - prev, 0.0))
            prev = cum
        labels = ['<= %g' % b if b != float('inf') else '> last'
                  for b, _ in rows]
        ax.bar([x + (i - 0.5) * width for x in range(len(counts))], counts,
               width, label='samples in %s' % mode, color=COLORS[mode])
    bounds = [b for b, _ in (hist.get(vocabulary.HAP) or [])]
    for profile, style, name in ((result.active, ':', 'active'),
                                 (result.profile, '-', 'recommended')):
        for edge in ('upper', 'lower'):
            value = profiles.from_milli(
                getattr(profile.thresholds, '%s_%s' % (prefix, edge)))
            x = _position(bounds, float(value))
            ax.axvline(x, linestyle=style, color='black' if name ==
                       'recommended' else 'grey', linewidth=1.2)
            ax.text(x, ax.get_ylim()[1] * 0.95, ' %s %s %s' % (
                name, edge, value), rotation=90, va='top', fontsize=7)
    if labels:
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, fontsize=7)
    ax.set_ylabel('samples')
    ax.set_title('%s: sampled %s per mode' % (result.generation, unit),
                 fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig, pyplot)


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
    ax.set_xticklabels(names, rotation=30, fontsize=7, ha='right')
    ax.set_ylabel('% over better static mode')
    ax.set_title('%s: adaptive on held-out traces (MODELED, estimated '
                 'costs)' % result.generation, fontsize=9)
    ax.legend(fontsize=7)
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


def _thresholds_row(profile):
    t = profile.to_dict()['thresholds']
    return ' '.join('%s=%s' % (k, t[k]) for k in t) + \
        ' history=%d interval=%d s' % (profile.history_samples,
                                       profile.interval_s)


def render(results, window, url):
    """(HTML text, {file name: PNG bytes})."""
    pyplot = plot.backend()
    pngs = {}
    e = html.escape
    body = ['<h1>Adaptive paging: thresholds per CPU generation</h1>',
            '<p>From %s over the last %s. Costs are estimated from the '
            'kernel\'s overhead counters; every replay is <b>modeled</b> '
            '(cost model, held-out traces).</p>' % (e(url), e(window))]
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
        body.append(
            '<table><tr><th>per event</th><th>estimated</th><th>shipped '
            'model (%s)</th></tr>'
            '<tr><td>page fault, shadow over hap</td><td>%.4g us</td>'
            '<td>%.4g us</td></tr>'
            '<tr><td>TLB miss, hap over shadow</td><td>%.4g ns</td>'
            '<td>%.4g ns</td></tr>'
            '<tr><td>switch (mean)</td><td>%.4g us</td><td>-</td></tr>'
            '</table>' % (
                e(base.name), c.fault_s * 1e6,
                (base.cost_s(vocabulary.SHADOW, 'page_fault')
                 - base.cost_s(vocabulary.HAP, 'page_fault')) * 1e6,
                c.miss_s * 1e9,
                (base.cost_s(vocabulary.HAP, 'tlb_miss')
                 - base.cost_s(vocabulary.SHADOW, 'tlb_miss')) * 1e9,
                c.switch_s * 1e6))
        body.append('<p>Active: <code>%s</code><br>Recommended: '
                    '<code>%s</code></p>' % (e(_thresholds_row(r.active)),
                                             e(_thresholds_row(r.profile))))
        body.append('<p>Held-out traces (modeled): worst regret %+.2f %% '
                    'active, %+.2f %% recommended.</p>'
                    % (r.active_summary.worst_regret * 100,
                       r.new_summary.worst_regret * 100))
        for name, data in (
                ('ftlb', _histogram(pyplot, r, M.SAMPLED_FTLB, 'tlb',
                                    'FTLB')),
                ('fpf', _histogram(pyplot, r, M.SAMPLED_FPF, 'pf', 'FPF')),
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


def write(out, results, window, url):
    """The report, its plots and a profile per generation with one,
    into ``out``: all or nothing (staged there, then renamed)."""
    page, pngs = render(results, window, url)
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
