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

"""The cost model, the trace and hardware formats, the evaluator and the
calibration against the seed papers (all figures are modeled)."""

import dataclasses
import json
import math

from click.testing import CliRunner
import pytest

from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging import cpu
from nova_adaptive_paging import dsp
from nova_adaptive_paging import profiles
from nova_adaptive_paging.tuning import derivation
from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import family
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces

TRACES = traces.builtin()
HARDWARE = {name: hardware.resolve(name)
            for name in hardware.builtin_names()}
NEHALEM = HARDWARE['nehalem']
PHASED = [name for name in TRACES if name.startswith('phases-')]

# Wang et al., VEE 2011, Table 3: execution time (s) in HAP and in SP.
TABLE3 = {'mcf': (383, 329), 'gcc': (403, 534)}


# -- traces ------------------------------------------------------------------
GOOD = ('# a comment\n'
        'interval_s,instructions,tlb_misses,page_faults\n'
        '1,1000,10,1\n'
        '# comments between rows too\n'
        '2.5,2000,20,0\n')


def test_trace_parses_and_defaults_optional_columns():
    trace = traces.loads(GOOD, 'x.csv')
    assert trace.name == 'x'
    assert trace.interval_s == (1.0, 2.5)
    assert trace.cr3_writes == (0.0, 0.0)
    assert not trace.has_working_set
    assert trace.comment == 'a comment'


@pytest.mark.parametrize('text, line, column', [
    ('interval_s,instructions,tlb_misses\n1,2,3\n', 1, 'page_faults'),
    ('interval_s,instructions,tlb_misses,page_faults\n1,2,-3,4\n', 2,
     'tlb_misses'),
    ('interval_s,instructions,tlb_misses,page_faults\n1,2,3,x\n', 2,
     'page_faults'),
    ('interval_s,instructions,tlb_misses,page_faults\n0,2,3,4\n', 2,
     'interval_s'),
    ('interval_s,instructions,tlb_misses,page_faults\n1,2,3,4\n1,2\n', 3,
     None),
    ('# only a comment\n', None, None),
    ('interval_s,instructions,tlb_misses,page_faults\n', None, None),
])
def test_malformed_trace_names_file_line_and_column(text, line, column):
    with pytest.raises(traces.TraceError) as err:
        traces.loads(text, 'bad.csv')
    assert (err.value.source, err.value.line, err.value.column) == (
        'bad.csv', line, column)
    assert str(err.value).startswith('bad.csv')


def test_dumps_round_trips():
    rows = [{'interval_s': 0.5, 'instructions': 10, 'tlb_misses': 1,
             'page_faults': 2, 'working_set_mib': 64}]
    trace = traces.loads(traces.dumps(rows, 'made here'), 'r.csv')
    assert trace.interval_s == (0.5,) and trace.working_set_mib == (64.0,)
    assert trace.comment == 'made here'


def test_every_shipped_trace_says_where_its_numbers_come_from():
    assert len(TRACES) >= 19
    for name, trace in TRACES.items():
        assert 'MODELED' in trace.comment, name
        assert 'ssumed' in trace.comment, name


# -- hardware profiles --------------------------------------------------------
def test_nehalem_profile_carries_the_papers_costs():
    assert NEHALEM.event_cost_ns['hap']['tlb_miss'] == 4
    assert NEHALEM.event_cost_ns['shadow']['page_fault'] == 10000
    for name, hw in HARDWARE.items():
        for field in ('event_cost_ns.hap.tlb_miss',
                      'event_cost_ns.shadow.page_fault',
                      'switch_cost_ns.to_shadow_per_mib'):
            assert hw.sources.get(field), (name, field)


def test_bad_hardware_profile_names_the_field():
    text = NEHALEM_TEXT.replace('page_fault: 10000', 'page_fault: -1')
    with pytest.raises(hardware.HardwareError) as err:
        hardware.loads(text, 'hw.yaml')
    assert err.value.field == 'event_cost_ns.shadow.page_fault'
    with pytest.raises(hardware.HardwareError):
        hardware.resolve('/nonexistent/profile.yaml')


NEHALEM_TEXT = (hardware.costmodel.data_dir('hardware') / 'nehalem.yaml'
                ).read_text()


# -- Table 3 ------------------------------------------------------------------
@pytest.mark.parametrize('name', sorted(TABLE3))
def test_table3_reproduced_within_5_percent(name):
    """mcf: 383 s HAP vs 329 s SP; gcc: 403 s vs 534 s (Wang et al.,
    VEE 2011, Table 3), with the Nehalem profile's costs."""
    replay = evaluator.Replay(TRACES[name], NEHALEM)
    hap = replay.static(evaluator.HAP)['time_s']
    shadow = replay.static(evaluator.SHADOW)['time_s']
    paper_hap, paper_sp = TABLE3[name]
    assert abs((hap / shadow) / (paper_hap / paper_sp) - 1) < 0.05
    assert abs(hap / paper_hap - 1) < 0.05
    assert abs(shadow / paper_sp - 1) < 0.05


def test_table3_traces_carry_the_papers_totals():
    assert TRACES['mcf'].totals()['tlb_misses'] == 12539673680
    assert TRACES['mcf'].totals()['page_faults'] == 243491
    assert TRACES['gcc'].totals()['tlb_misses'] == 1082065972
    assert TRACES['gcc'].totals()['page_faults'] == 13320141


# -- the evaluator ------------------------------------------------------------
def steady(rows, insns=2e9, ftlb=30.0, fpf=50.0, seconds=1.0):
    row = {'interval_s': seconds, 'instructions': insns * seconds,
           'tlb_misses': ftlb * insns * seconds / 1000,
           'page_faults': fpf * 1e-7 * insns * seconds / 1000,
           'working_set_mib': 1024}
    return [dict(row) for _ in range(rows)]


def test_row_length_does_not_change_the_result():
    """Rows are split and merged: one long row or many short ones."""
    profile = profiles.builtin()
    results = []
    for rows, seconds in ((1, 300.0), (300, 1.0), (1200, 0.25)):
        trace = traces.loads(traces.dumps(steady(rows, seconds=seconds)),
                             't.csv')
        results.append(evaluator.evaluate(trace, NEHALEM, profile))
    for other in results[1:]:
        for policy in evaluator.POLICIES:
            assert math.isclose(other['policies'][policy]['time_s'],
                                results[0]['policies'][policy]['time_s'],
                                rel_tol=1e-6), policy
            assert (other['policies'][policy]['switches']
                    == results[0]['policies'][policy]['switches'])


def test_adaptive_pays_warmup_switch_and_lag():
    """A TLB-heavy workload starts in HAP, leaves after a full window and
    pays the switch into shadow mode; the paper's rule alone."""
    profile = dataclasses.replace(profiles.builtin(), guard=None)
    trace = traces.loads(traces.dumps(steady(300)), 't.csv')
    r = evaluator.evaluate(trace, NEHALEM, profile)['policies']
    ad = r['adaptive']
    assert ad['switches'] == 1
    window = profile.history_samples * profile.interval_s
    assert ad['time_hap_s'] == pytest.approx(window)
    switch = NEHALEM.switch_s('shadow', 1024)
    assert ad['time_s'] == pytest.approx(ad['time_hap_s']
                                         + ad['time_shadow_s'] + switch)
    assert r['shadow']['time_s'] < ad['time_s'] < r['hap']['time_s']


def test_the_guard_leaves_a_mode_over_budget_before_the_window_fills():
    """The same workload with the shipped profile's switch guard: its
    first 5 s in HAP cost 30 misses per 1000 instructions at 2e9/s times
    4 ns = 1.2 s more than shadow mode would have, over the regret budget
    (0.5 % of at least 100 s: 0.5 s), so the guard goes to the cheaper
    static mode after one interval instead of the window's three."""
    profile = profiles.builtin()
    assert 5 * 2e9 * 30 / 1000 * 4e-9 > 0.005 * 100
    trace = traces.loads(traces.dumps(steady(300)), 't.csv')
    r = evaluator.evaluate(trace, NEHALEM, profile)['policies']
    ad = r['adaptive']
    assert ad['switches'] == 1
    assert ad['time_hap_s'] == pytest.approx(profile.interval_s)


def test_without_guest_faults_hap_sees_no_data_and_stays():
    profile = profiles.builtin()
    trace = traces.loads(traces.dumps(steady(300)), 't.csv')
    replay = evaluator.Replay(trace, NEHALEM)
    blind = replay.adaptive(profile.thresholds, profile.history_samples, 5,
                            guest_faults=False)
    assert blind['switches'] == 0
    assert blind['time_s'] == pytest.approx(replay.static(0)['time_s'])


def test_each_interval_is_charged_to_the_mode_it_ran_in():
    """A TLB-bound guest (30 misses per 1000 instructions at 2e9
    instructions/s: 4 ns each on Nehalem, +24 % in HAP; nothing extra in
    shadow mode) sampled every 5 s with a window of one: the first 5 s
    of modeled time run in HAP, the sample ends it and the rest runs in
    shadow mode after one switch."""
    rows = [{'interval_s': 1, 'instructions': 2e9, 'tlb_misses': 6e7,
             'page_faults': 0, 'working_set_mib': 100}] * 100
    trace = traces.loads(traces.dumps(rows), 'tlb.csv')
    hap_rate = 1 + 6e7 * 4e-9                   # modeled s per native s
    t = dsp.Thresholds(tlb_upper=1000, tlb_lower=100, pf_upper=10 ** 6,
                       pf_lower=10 ** 5, pt_upper=2000, pt_lower=1000)
    got = evaluator.Replay(trace, NEHALEM).adaptive(t, 1, 5)
    assert got['switches'] == 1
    assert got['time_hap_s'] == pytest.approx(5.0)
    assert got['time_shadow_s'] == pytest.approx(100 - 5 / hap_rate)
    assert got['time_s'] == pytest.approx(
        5 + 100 - 5 / hap_rate + NEHALEM.switch_s('shadow', 100))


def test_an_oracle_that_starts_in_hap_pays_to_leave_it():
    """On a steady trace shadow mode wins: the free oracle runs it from
    the start; the one starting in HAP switches once, at the start, and
    pays exactly one switch more."""
    rows = [{'interval_s': 1, 'instructions': 2e9, 'tlb_misses': 6e7,
             'page_faults': 0, 'working_set_mib': 100}] * 100
    replay = evaluator.Replay(traces.loads(traces.dumps(rows), 'tlb.csv'),
                              NEHALEM)
    free, hap = replay.oracle(5), replay.oracle(5, start=evaluator.HAP)
    assert free['switches'] == 0
    assert free['time_s'] == pytest.approx(100)
    assert hap['switches'] == 1
    assert hap['time_s'] == pytest.approx(
        100 + NEHALEM.switch_s('shadow', 100))
    assert replay.oracle(5, start=evaluator.SHADOW) == free


def _tlb_bound(mib, rows=None):
    """100 s of a TLB-bound guest of ``mib`` MiB (or per-row sizes):
    1.24 s a second in HAP (6e7 misses at 4 ns), 1 s in shadow mode, on
    Nehalem."""
    rows = rows or [mib] * 100
    csv = [{'interval_s': 1, 'instructions': 2e9, 'tlb_misses': 6e7,
            'page_faults': 0, 'working_set_mib': size} for size in rows]
    return evaluator.Replay(traces.loads(traces.dumps(csv), 'tlb.csv'),
                            NEHALEM)


# Nehalem's shipped guard: 28.648 ms a switch, 27.648 ms a GiB into
# shadow mode, 0.5 % of the time.
GUARD = dsp.Guard(tlb_cost_ps=4000, pf_cost_ps=10000000,
                  switch_cost_ns=28648000, budget_ppm=5000,
                  switch_ns_per_gib=27648000)


@pytest.mark.parametrize('mib', (100, 4096, 65536))
def test_the_floor_within_a_budget_switches_once_the_credit_pays(mib):
    """Starting in HAP with credit for two switches at 28.648 ms and
    0.5 % of the time worked after, a switch into shadow mode priced at
    P (28.648 ms a GiB, at least 28.648 ms) can be made in the first
    piece of 5 native seconds at whose end 0.057296 + 0.005 x 1.24 x 5
    x pieces >= P (the time worked taken in the dearer mode, HAP): in
    the first piece for 100 MiB, the second for 4 GiB (P = 110.6 ms),
    none within 100 s for 64 GiB (P = 1.77 s), which then runs in HAP
    throughout.  The piece it switches in costs its shadow time."""
    replay = _tlb_bound(mib)
    price = max(28648000, 27648000 * mib / 1024) * 1e-9
    pieces = 1
    while pieces <= 20 and 0.057296 + 0.005 * 1.24 * 5 * pieces < price:
        pieces += 1
    hap_pieces = pieces - 1
    expected = (124.0 if pieces > 20 else 1.24 * 5 * hap_pieces
                + NEHALEM.switch_s('shadow', mib) + 100 - 5 * hap_pieces)
    assert {100: 0, 4096: 1, 65536: 20}[mib] == min(hap_pieces, 20)
    assert replay.floor_within_budget(5, GUARD) == pytest.approx(expected)
    # With credit for every switch it is the oracle that starts in HAP.
    rich = dsp.Guard(4000, 10000000, 28648000, 999999, 0)
    assert replay.floor_within_budget(5, rich) == pytest.approx(
        replay.oracle(5, start=evaluator.HAP)['time_s'])


def test_no_guard_goes_below_the_floor_of_its_credit():
    """The guard keeps its switching within its credit, so the floor of
    that credit is below what it takes: on the family's guests of every
    size (family.unit_family at three sizes), and on the cases where a
    floor is easiest to get wrong: a switch priced below what it takes
    (the guard's price per GiB leaves out the fixed part), decided at
    instants that fall inside a piece of native time, and a working set
    that changes from row to row."""
    profile = profiles.builtin()
    g = profile.guard
    replays = [evaluator.Replay(family.at_size(member, gib), NEHALEM)
               for member in family.unit_family() for gib in (1, 64, 512)]
    replays += [_tlb_bound(mib) for mib in (3000, 3973, 8192, 16384)]
    replays.append(_tlb_bound(None, [524288 if i % 5 == 0 else 1024
                                     for i in range(100)]))
    for replay in replays:
        got = replay.adaptive(profile.thresholds, profile.history_samples,
                              profile.interval_s, guard=g)['time_s']
        for interval in (profile.interval_s, 4, 1):
            floor = replay.floor_within_budget(interval, g)
            assert floor <= got * (1 + 1e-9), (replay.trace.name, interval)
        # Never switching is within any credit.
        assert floor <= replay.static(evaluator.HAP)['time_s'] * (
            1 + 1e-9)


@pytest.mark.parametrize('name', sorted(TRACES))
def test_oracle_is_a_lower_bound_of_static_modes(name):
    r = evaluator.evaluate(TRACES[name], NEHALEM, profiles.builtin(),
                           policies=('hap', 'shadow', 'oracle'))['policies']
    best = min(r['hap']['time_s'], r['shadow']['time_s'])
    assert r['oracle']['time_s'] <= best * (1 + 1e-9)


# -- calibration --------------------------------------------------------------
@pytest.fixture(scope='module')
def calibrated():
    # Tuned on the tuning traces only; judged on the held-out ones.
    return {name: derivation.calibrate(hw, derivation.tuning_traces())[0]
            for name, hw in HARDWARE.items()}


def test_the_split_keeps_tuning_and_testing_apart():
    tune, held = set(derivation.TUNING_TRACES), set(derivation.HELD_OUT_TRACES)
    assert not tune & held
    assert tune | held == set(TRACES)
    assert {n for n in PHASED} & tune and {n for n in PHASED} & held


def test_calibrated_profile_is_in_the_foundation_format(calibrated):
    for profile in calibrated.values():
        again = profiles.loads(profile.dump(), 'calibrated.yaml')
        assert again == profile
        assert again.provenance.method == 'calibrated'


def test_adaptive_with_derived_thresholds_within_1_percent(calibrated):
    """For every hardware profile and held-out trace: within 1 % of the
    better static mode; better than it on the phase-changing traces."""
    assert set(PHASED) & set(derivation.HELD_OUT_TRACES)
    for hw_name, profile in calibrated.items():
        for name in derivation.HELD_OUT_TRACES:
            trace = TRACES[name]
            r = evaluator.evaluate(trace, HARDWARE[hw_name], profile)
            vs_static = evaluator.regret(r)[0]
            assert vs_static < 0.01, (hw_name, name, vs_static)
            if name in PHASED:
                assert vs_static < 0, (hw_name, name, vs_static)


def test_derived_thresholds_follow_the_costs():
    """The modern profile has dearer TLB misses in HAP and cheaper faults
    in shadow mode: the P-to-T break-even rises, so do the P-to-T
    thresholds; a TLB-miss frequency pays off sooner, so the FTLB
    thresholds fall; the fault thresholds rise (same free factors)."""
    old_hw, new_hw = HARDWARE['nehalem'], HARDWARE['sapphirerapids-5lp']
    assert derivation.break_even(new_hw)[0] > derivation.break_even(old_hw)[0]
    t_old = derivation.derive(old_hw, 3, 5, 1.25, 10)
    t_new = derivation.derive(new_hw, 3, 5, 1.25, 10)
    assert t_new.pt_upper > t_old.pt_upper
    assert t_new.pt_lower > t_old.pt_lower
    assert t_new.tlb_upper < t_old.tlb_upper
    assert t_new.tlb_lower < t_old.tlb_lower
    assert t_new.pf_upper > t_old.pf_upper
    assert t_new.pf_lower > t_old.pf_lower


def test_below_the_lower_thresholds_a_mode_loses_little():
    """Rule 3 keeps the mode below both lower thresholds; there the mode
    kept may lose at most half the 1 % regret bound to the other, however
    short the stay (1 s interval, window of one) and dear the switch."""
    for hw in HARDWARE.values():
        t = derivation.derive(hw, 1, 1, 1.25, 10)
        ips = hw.reference_ips
        hap_loss = (t.tlb_lower / 1e6 * ips) * (
            hw.cost_s('hap', 'tlb_miss') - hw.cost_s('shadow', 'tlb_miss'))
        shadow_loss = (t.pf_lower / 1e13 * ips) * (
            hw.cost_s('shadow', 'page_fault')
            - hw.cost_s('hap', 'page_fault'))
        assert hap_loss <= 0.005 * 1.01
        assert shadow_loss <= 0.005 * 1.01


def test_break_even_matches_the_papers_costs():
    # 4 ns per TLB miss against 10 us per fault: P-to-T 4000 (x1e-7).
    assert derivation.break_even(NEHALEM)[0] == pytest.approx(4000)
    t = derivation.derive(NEHALEM, 3, 5, 1.25, 10)
    assert t.pt_lower < profiles.to_milli(4000) < t.pt_upper
    assert isinstance(t, dsp.Thresholds)


# -- the command line ---------------------------------------------------------
def test_simulate_json_shape(tmp_path):
    paths = [str(p) for p in traces.builtin_paths()][:3]
    # As a shell expands "--trace traces/*.csv".
    result = CliRunner().invoke(
        cli.main, ['simulate', '--hardware', 'nehalem', '--json',
                   '--trace'] + paths)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [d['trace'] for d in doc] == [p.rsplit('/', 1)[1][:-4]
                                         for p in paths]
    for item in doc:
        assert set(item) == {'trace', 'hardware', 'policies'}
        assert item['hardware'] == 'nehalem'
        p = item['policies']
        assert set(p) == {'hap', 'shadow', 'adaptive', 'oracle'}
        assert set(p['hap']) == set(p['shadow']) == {'time_s', 'switches'}
        assert p['hap']['switches'] == p['shadow']['switches'] == 0
        assert set(p['oracle']) == {
            'time_s', 'switches', 'time_hap_s', 'time_shadow_s'}
        assert set(p['adaptive']) == set(p['oracle']) | {'explorations'}
    assert 'modeled' in result.stderr


def test_simulate_table_and_bad_trace(tmp_path):
    bad = tmp_path / 'bad.csv'
    bad.write_text('interval_s,instructions,tlb_misses,page_faults\n'
                   '1,2,3,oops\n')
    result = CliRunner().invoke(
        cli.main, ['simulate', '--hardware', 'nehalem', '--trace', str(bad)])
    assert result.exit_code == 2
    assert '%s:2: column page_faults' % bad in result.stderr
    good = str(traces.builtin_paths()[0])
    result = CliRunner().invoke(cli.main, ['simulate', '--hardware',
                                           'nehalem', '--trace', good])
    assert result.exit_code == 0
    assert 'MODELED' in result.output and 'vs oracle' in result.output


def test_calibrate_writes_a_loadable_profile(tmp_path):
    out = tmp_path / 'derived.yaml'
    trace = str(traces.builtin_paths()[0])
    result = CliRunner().invoke(cli.main, [
        'calibrate', '--hardware', 'sapphirerapids-5lp', '--out', str(out),
        '--trace', trace])
    assert result.exit_code == 0, result.output
    profile = profiles.load(str(out))
    # Filed under the generation the hardware profile names, a key
    # nova-paging cpu-generation gives Sapphire Rapids (family 6, 0x8f).
    assert profile.generation == cpu.generation_key('GenuineIntel', 6, 0x8f)
    assert 'sapphirerapids-5lp' in profile.provenance.source


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip('matplotlib')
    out = tmp_path / 'modes.png'
    trace = str(traces.builtin_paths()[0])
    result = CliRunner().invoke(cli.main, [
        'simulate', '--hardware', 'nehalem', '--trace', trace, '--plot',
        str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_calibrate_compare_prints_the_cross_generation_table(tmp_path):
    names = ['nehalem', 'sapphirerapids-5lp']
    args = ['calibrate', '--compare']
    for name in names:
        args += ['--hardware', name]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert 'MODELED' in lines[0]
    assert lines[1].split() == names
    rows = {line[:line.index('%') - 3].strip(): line for line in lines[2:]}
    assert set(rows) == {'calibrated for nehalem',
                         'calibrated for sapphirerapids-5lp',
                         'paper Table 2'}
    # Each generation's own thresholds meet the goal on its own costs
    # (the diagonal); every row has a cell per column.
    for i, name in enumerate(names):
        cells = rows['calibrated for %s' % name].split('%')
        assert len([c for c in cells if c.strip()]) >= 2 * len(names)
        own = rows['calibrated for %s' % name]
        cell = own[len(own) - (len(names) - i) * 22:][:22]
        assert '*' not in cell, own
    assert list(tmp_path.iterdir()) == []


def test_calibrate_wants_one_hardware_and_an_out_file(tmp_path):
    for args in (['--hardware', 'nehalem'],
                 ['--hardware', 'nehalem', '--hardware', 'nehalem',
                  '--out', str(tmp_path / 'x.yaml')]):
        result = CliRunner().invoke(cli.main, ['calibrate'] + args)
        assert result.exit_code == 2
        assert result.stderr.count('\n') == 1, result.stderr
        assert '--compare' in result.stderr
    assert list(tmp_path.iterdir()) == []
