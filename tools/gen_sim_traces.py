#!/usr/bin/env python3
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

"""Regenerate the shipped workload traces (deterministic).

    python tools/gen_sim_traces.py nova_adaptive_paging/sim/data/traces

Every trace is synthetic: its rates come from the seed papers where they
give them and from stated assumptions where they do not; the comment at
the top of each file says which.  Counts are the workload's intrinsic
behaviour (the same in both paging modes).
"""

import os
import random
import sys

from nova_adaptive_paging.costmodel import traces

IPS = 2e9            # assumed instructions per native second (Table 1 rows)
NEHALEM_TLB_S = 4e-9     # Section 4.3, per TLB miss in HAP
NEHALEM_PF_S = 10e-6     # Section 4.3, per page fault in shadow mode


def rows_at(seconds, ips, ftlb, fpf, cr3=0.0, ws=None, jitter=0.0,
            rng=None):
    """1-second rows at the paper's frequencies (FTLB per 1000
    instructions, FPF per 1000 instructions x 10^7)."""
    out = []
    for _ in range(int(seconds)):
        k = 1.0 + (rng.uniform(-jitter, jitter) if jitter else 0.0)
        insns = ips * k
        row = {'interval_s': 1, 'instructions': round(insns),
               'tlb_misses': round(ftlb * insns / 1000),
               'page_faults': round(fpf * 1e-7 * insns / 1000)}
        if cr3:
            row['cr3_writes'] = round(cr3 * k)
        if ws is not None:
            row['working_set_mib'] = ws
        out.append(row)
    return out


def table3(name, tlb, pf, hap_s, sp_s, ws, seed, front=0.0):
    """A trace with Table 3's totals; native time is not in the paper.

    ``front`` is the share of the page faults taken in the first 20 s
    (first touch of the working set).
    """
    native = (hap_s + sp_s - tlb * NEHALEM_TLB_S - pf * NEHALEM_PF_S) / 2
    n = int(native)
    rng = random.Random(seed)
    weights = [rng.uniform(0.8, 1.2) for _ in range(n)]
    wt = [rng.uniform(0.8, 1.2) for _ in range(n)]
    wp = [rng.uniform(0.5, 1.5) for _ in range(n)]
    if front:
        rest = sum(wp[20:])
        wp[:20] = [front / (1 - front) * rest / 20] * 20

    def spread(total, w):
        s = sum(w)
        parts = [int(total * x / s) for x in w]
        parts[-1] += total - sum(parts)
        return parts

    durations = [native / n] * n
    insns = spread(int(native * 1e9), weights)
    rows = [{'interval_s': round(d, 6), 'instructions': i, 'tlb_misses': t,
             'page_faults': p, 'working_set_mib': ws}
            for d, i, t, p in zip(durations, insns, spread(tlb, wt),
                                  spread(pf, wp))]
    rows[-1]['interval_s'] = round(native - sum(r['interval_s']
                                                for r in rows[:-1]), 6)
    comment = (
        '%s, 32-bit SPEC INT 2006 on Xen (MODELED trace).\n'
        'Totals from Wang et al. (VEE 2011), Table 3, HAP-mode counts:\n'
        '  TLB misses %d, page faults %d; measured %d s in HAP, %d s in '
        'SP.\n'
        'Native time is not in the paper: %.2f s is chosen so that the\n'
        'Nehalem profile (4 ns/TLB miss, 10 us/fault) gives the measured\n'
        'HAP+SP sum; the HAP/SP ratio is then a check of the costs.\n'
        'Instructions: assumed 1e9 per native second (not in the paper).\n'
        'Working set: %d MiB (Gandhi et al., ISCA 2016, Table V).\n'
        'Rows: 1 s slices with +-20%% (faults +-50%%) seeded noise.'
        % (name, tlb, pf, hap_s, sp_s, native, ws))
    if front:
        comment += (
            '\nAssumed: %d %% of the faults in the first 20 s (first touch'
            '\nof the working set: 243k faults x 4 KiB is about mcf\'s'
            '\nfootprint).' % (front * 100))
    return rows, comment


# Table 1 rows, read as in tests/unit/test_dsp.py; "sometimes" cells become
# intermittent rows: (pf, tlb, note, intermittent pf, share of time).
TABLE1 = [
    (40, 0.5, 'SP', None, 0),
    (125, 0.5, 'HAP', None, 0),
    (0, 0.05, 'Draw; TLB "< 0.5" read as 0.05', None, 0),
    (160000, 0.9, 'HAP; PF "> 150000" read as 160000, TLB "< 1" as 0.9',
     None, 0),
    (10000, 2.4, 'HAP', None, 0),
    (4700, 0.3, 'Draw', None, 0),
    (1600, 16, 'SP', None, 0),
    (90000, 2.7, 'HAP', None, 0),
    (0, 0.02, 'Draw; PF "0, sometimes 100": 100 in 10 % of the seconds',
     100, 0.1),
    (0, 0.3, 'HAP; PF "0 or 10000": 10000 in half of the seconds, in '
     'runs', 10000, 0.5),
    (0, 12, 'SP; TLB "frequently > 10" read as 12, PF "sometimes > '
     '10000": 12000 in 15 % of the seconds', 12000, 0.15),
    (40, 4.0, 'SP; PF "< 50" read as 40, TLB "> 3.9" as 4.0', None, 0),
]


def table1_row(index, seed):
    pf, tlb, note, alt_pf, share = TABLE1[index]
    rng = random.Random(seed)
    rows = []
    while len(rows) < 600:
        run = rng.randint(5, 30)
        use = alt_pf if alt_pf is not None and rng.random() < share else pf
        rows += rows_at(run, IPS, tlb, use, ws=1024, jitter=0.05, rng=rng)
    comment = (
        'SPEC INT 2006 sample, row %d of Table 1 of Wang et al. (VEE 2011)\n'
        '(MODELED trace; the transcription lost the benchmark names, and\n'
        'row 13 repeats row 4).  FPF %s x1e-7 and FTLB %s per 1000\n'
        'instructions; paper\'s winner: %s.\n'
        'Assumed: 2e9 instructions per native second, 600 s, 1 GiB\n'
        'working set, +-5 %% seeded jitter, 5-30 s runs.'
        % (index + 1, pf, tlb, note))
    return rows[:600], comment


def libquantum(seed):
    rng = random.Random(seed)
    rows = []
    while len(rows) < 806:
        rows += rows_at(rng.randint(12, 28), IPS, 2.0, 40, ws=100,
                        jitter=0.05, rng=rng)
        rows += rows_at(rng.randint(1, 2), IPS, 2.0, 50000, ws=100,
                        jitter=0.05, rng=rng)
    comment = (
        'libquantum-like: "frequent yet short bursts of page faults"\n'
        '(Wang et al., VEE 2011, Section 4.5), SP slightly better than HAP\n'
        'overall (Table 5: 806 s SP vs 813 s HAP) (MODELED trace).\n'
        'Assumed rates: FTLB 2, FPF 40 between bursts; bursts of 1-2 s\n'
        'at FPF 50000 every 13-30 s; 2e9 instructions/s; 100 MiB.')
    return rows[:806], comment


KINDS = {
    # name: (ftlb, fpf, cr3 per second)
    'tlb-heavy': (30.0, 50, 500),
    'fault-heavy': (1.0, 300000, 2000),
    'quiet': (0.05, 10, 100),
    'mixed': (3.0, 8000, 1000),
}


def phases(plan, seed, what):
    rng = random.Random(seed)
    rows = []
    for kind, seconds in plan:
        ftlb, fpf, cr3 = KINDS[kind]
        rows += rows_at(seconds, IPS, ftlb, fpf, cr3=cr3, ws=1024,
                        jitter=0.05, rng=rng)
    comment = (
        '%s (MODELED trace).\n'
        'Phases (kind:seconds): %s.\n'
        'Rates per kind (FTLB, FPF x1e-7, CR3 writes/s), assumed, from the\n'
        'ranges of Table 1 of Wang et al. (VEE 2011): %s.\n'
        'Assumed: 2e9 instructions/s, 1 GiB working set, +-5 %% jitter.'
        % (what, ', '.join('%s:%d' % p for p in plan),
           '; '.join('%s %s' % (k, v) for k, v in sorted(KINDS.items()))))
    return rows, comment


def fork_exec(seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(6):
        # fork test: 1.1e6 faults/s; exec test: 0.5e6 faults/s
        rows += rows_at(30, IPS, 1.0, 1.1e6 / 2e6 * 1e7, cr3=36860,
                        ws=256, jitter=0.05, rng=rng)
        rows += rows_at(20, IPS, 1.0, 0.5e6 / 2e6 * 1e7, cr3=9000,
                        ws=256, jitter=0.05, rng=rng)
    comment = (
        'fork/exec-heavy (MODELED trace): the AIM9 fork and exec tests of\n'
        'the Xen HVM evaluation (004, Table 8), where shadow paging lost\n'
        '91 % (fork) and 81 % (exec) against native.\n'
        'Assumed rates, sized so that the Nehalem profile loses about as\n'
        'much in shadow mode: fork phases 1.1e6 guest faults and 36860\n'
        'CR3 writes per second (9215 forks/s x 4), exec phases 0.5e6\n'
        'faults and 9000 CR3 writes per second; FTLB 1; 2e9\n'
        'instructions/s; 256 MiB.')
    return rows, comment


def quiet(seed):
    rng = random.Random(seed)
    rows = rows_at(600, 1e8, 0.05, 10, cr3=100, ws=512, jitter=0.2,
                   rng=rng)
    comment = ('quiet: an almost idle guest (MODELED trace).\n'
               'Assumed: 1e8 instructions/s, FTLB 0.05, FPF 10, 100 CR3\n'
               'writes/s, 512 MiB, +-20 % jitter.')
    return rows, comment


def all_traces():
    yield 'mcf', table3('mcf', 12539673680, 243491, 383, 329, 1700, 429,
                        front=0.85)
    yield 'gcc', table3('gcc', 1082065972, 13320141, 403, 534, 885, 403)
    for i in range(len(TABLE1)):
        yield 'spec-int-t1-row%02d' % (i + 1), table1_row(i, 100 + i)
    yield 'libquantum-bursts', libquantum(462)
    yield 'phases-tlb-fault', phases(
        [('tlb-heavy', 150), ('fault-heavy', 150)] * 4, 7,
        'Phase-changing: TLB-heavy and fault-heavy halves alternate')
    yield 'phases-irregular', phases(
        [('quiet', 60), ('tlb-heavy', 240), ('mixed', 90),
         ('fault-heavy', 200), ('tlb-heavy', 60), ('fault-heavy', 45),
         ('tlb-heavy', 300), ('quiet', 30), ('fault-heavy', 120)], 8,
        'Phase-changing: irregular phases of every kind')
    yield 'fork-exec', fork_exec(9)
    yield 'quiet', quiet(10)


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, (rows, comment) in all_traces():
        with open(os.path.join(out_dir, name + '.csv'), 'w') as f:
            f.write(traces.dumps(rows, comment + '\nGenerated by '
                                 'tools/gen_sim_traces.py.'))


if __name__ == '__main__':
    main(sys.argv[1])
