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

"""Boot placement: the prediction (pools/boot.py) from figures set by
hand, whose preferred pool each test works out itself, and what the
agent exports for it (the image and project of a guest, read from the
metadata Nova's own libvirt config classes write)."""

import math

import pytest

from nova_adaptive_paging.agent import guest as agent_guest
from nova_adaptive_paging.pools import boot
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import libvirt_xml
from nova_adaptive_paging.costmodel import traces

H = 3600.0


def stint(uuid, image, project, mode, observed_s, other_gain_s):
    return boot.Stint(uuid, image, project, mode, observed_s, other_gain_s)


def test_an_image_prefers_the_pool_its_guests_saved_time_in():
    # a1 in hap: shadow would have saved it 600 s in 1 h; a2 in shadow:
    # hap would have cost it 300 s more.  Shadow's advantage: 900 s in
    # 2 h, 12.5 % of their time.
    p = boot.Predictor([stint('a1', 'img-a', 'p', 'hap', H, 600.0),
                        stint('a2', 'img-a', 'p', 'shadow', H, -300.0)])
    got = p.predict('img-a', 'p')
    assert (got.mode, got.basis, got.guests) == ('shadow', 'image', 2)
    assert got.rate == pytest.approx(900.0 / (2 * H))


def test_the_other_way_round_prefers_hap():
    p = boot.Predictor([stint('b1', 'img-b', 'p', 'shadow', H, 400.0),
                        stint('b2', 'img-b', 'p', 'hap', 2 * H, -100.0)])
    got = p.predict('img-b', 'p')
    assert got.mode == 'hap'
    assert got.rate == pytest.approx(-500.0 / (3 * H))


def test_one_guest_is_not_enough_and_the_project_speaks_instead():
    stints = [stint('c1', 'img-c', 'q', 'hap', H, 900.0),
              stint('d1', 'img-d', 'q', 'shadow', H, 200.0),
              stint('d2', 'img-d', 'q', 'shadow', H, 200.0)]
    got = boot.Predictor(stints).predict('img-c', 'q')
    # The image has one guest (min_guests 2); the project's three:
    # 900 - 200 - 200 = 500 s of shadow advantage in 3 h.
    assert (got.mode, got.basis, got.guests) == ('shadow', 'project', 3)
    assert got.rate == pytest.approx(500.0 / (3 * H))
    assert boot.Predictor(stints, boot.Params(min_guests=1)).predict(
        'img-c', 'q').basis == 'image'


def test_a_preference_below_the_threshold_is_none():
    # 10 s in 2 h is 0.14 %, below the default 0.5 %.
    stints = [stint('e1', 'img-e', '', 'hap', H, 5.0),
              stint('e2', 'img-e', '', 'hap', H, 5.0)]
    got = boot.Predictor(stints).predict('img-e', '')
    assert got.mode is None and got.basis == 'image'
    assert boot.Predictor(stints, boot.Params(threshold=0.001)).predict(
        'img-e', '').mode == 'shadow'


def test_nothing_known_is_no_preference():
    got = boot.Predictor([]).predict('img-x', 'p-x')
    assert got == boot.NONE and 'no preference' in str(got)
    # A guest booted from a volume has no image: only its project.
    assert boot.Predictor([stint('f1', '', 'r', 'hap', H, 700.0),
                           stint('f2', '', 'r', 'hap', H, 700.0)]).predict(
        '', 'r').mode == 'shadow'


@pytest.mark.parametrize('field,value', [('min_guests', 0),
                                         ('threshold', -0.1),
                                         ('threshold', math.nan)])
def test_parameters_out_of_bounds_are_one_line(field, value):
    with pytest.raises(boot.BootError, match=field):
        boot.Params(**{field: value})


def test_reads_stay_off_for_the_refresh_and_say_so_once():
    now = [0.0]
    calls = []

    def read():
        calls.append(now[0])
        raise OSError('connection refused')

    cached = boot.Cached(read, refresh_s=600, clock=lambda: now[0])
    assert cached.get() is None and cached.news() == (
        True, 'connection refused')
    now[0] = 300
    assert cached.get() is None and cached.news() == (
        False, 'connection refused')
    assert calls == [0.0]               # not asked again within 600 s
    now[0] = 600
    cached._read = lambda: boot.History([], {}, {})
    assert cached.get() is not None and cached.news() == (True, None)


def test_the_agent_reads_the_image_and_project_nova_writes():
    spec = simhost.VmSpec('vm', traces.builtin()['gcc'],
                          {'hw:paging': 'adaptive'}, flavor='m1.adaptive')
    guest = libvirt_xml.nova_guest(spec)
    meta = guest.metadata[0]
    meta.roottype = 'image'
    meta.rootid = 'c0ffee00-0000-4000-8000-0000000000aa'
    meta.owner.projectid = '5eed0000-0000-4000-8000-0000000000bb'
    inst = agent_guest.read_instance('vm', spec.uuid, guest.to_xml())
    assert inst.image == 'c0ffee00-0000-4000-8000-0000000000aa'
    assert inst.project_id == '5eed0000-0000-4000-8000-0000000000bb'
    # Booted from a volume: Nova writes root type "volume", no image.
    meta.roottype = 'volume'
    assert agent_guest.read_instance('vm', spec.uuid,
                                     guest.to_xml()).image == ''
