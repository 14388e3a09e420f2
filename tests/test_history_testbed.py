"""`hpcnet history` over a real history: twelve ReFrame sessions of one p2p
case on the testbed, each its own session in a scratch results database, the
links shaped to 700 Mbit/s, cut to 450 Mbit/s from session 8 on and to 250 Mbit/s
in session 4 alone: every rate under what the shared host reaches (0.77-1.0 of
the 1 Gbit/s wire, by how busy it is), so every level is the shaper's, steady
whatever the host's load.
History must name session 8 (+-1) as the change of the raw 4 MiB bandwidth
with the link rate the runs recorded, no change of the metrics the cut does
not move (the ratio to iperf3 on the same link, the efficiency over the
declared rate), and session 4 as an outlier, not a change.

Needs root and namespaces (CI has both); skipped with the reason otherwise.
"""
import json
import subprocess
import time

from conftest import env_regex, run_reframe, running_testbed
from helpers import needs_testbed, run_hpcnet

from hpcnet import testbed as tbm
from hpcnet.acceptance.history import history, history_text, levels
from hpcnet.constants import CHECKS_DIR
from hpcnet.metrics import CALIBRATED_SUFFIX
from hpcnet.paths import WORK_DIR
from hpcnet.exitcodes import Exit

pytestmark = needs_testbed()

NAME = 'hpcneth'     # never touches a developer's 'hpcnet' testbed
SESSIONS = 12
CHANGE_AT = 8
OUTLIER_AT = 4
#: The testbed's 1 Gbit/s cut from CHANGE_AT on; OUTLIER_AT alone slower still.
RATES = {'clean': '700mbit', 'cut': '450mbit', 'outlier': '250mbit'}
#: The smallest p2p selection: one streaming case across two nodes.
SELECTION = 'hpcnet_p2p.*scale=2_nodes.*mode=bw'


def _rate(session: int) -> str:
    if session == OUTLIER_AT:
        return RATES['outlier']
    return RATES['cut'] if session >= CHANGE_AT else RATES['clean']


def test_history_names_the_session_the_link_was_cut(tmp_path, one_env_per_stack):
    env = [e for e in one_env_per_stack if 'openmpi' in e][:1] or one_env_per_stack[:1]
    db = tmp_path / 'results.db'
    took = []
    with running_testbed(NAME) as tb:
        for session in range(1, SESSIONS + 1):
            # Every link, so the partition declares the rate it has (tb.env()):
            # the case records it as its link rate, and its calibration
            # (iperf3 on the same link) passes.
            tb.shape(_rate(session))
            start = time.monotonic()
            where = tmp_path / f'session{session}'
            where.mkdir()
            proc, cases = run_reframe(where, '-c', str(CHECKS_DIR / 'p2p.py'), '-n', SELECTION,
                                      '-p', env_regex(env), system='testbed:eth', retries=0,
                                      prefix=tb.head_prefix(cwd=str(WORK_DIR)),
                                      env={**tb.env(), 'RFM_SQLITE_DB_FILE': str(db)})
            took.append(time.monotonic() - start)
            (case,) = [c for c in cases if c['name'].startswith('hpcnet_p2p')]
            assert case['result'] in ('pass', 'fail'), proc.stdout[-3000:]
            assert case['link_rate_bps'] == tbm.rate_bps(_rate(session))
        tb.shape(RATES['clean'])
    print(f'\n{SESSIONS} sessions in {sum(took):.0f} s ({", ".join(f"{t:.0f}" for t in took)})')

    res = run_hpcnet('history', '--db', str(db), '--system', 'testbed', '-n', 'hpcnet_p2p',
                     '--output', str(tmp_path / 'trend.html'), stderr=subprocess.STDOUT)
    print(res.stdout)
    assert res.returncode == Exit.FAILED, res.stdout
    assert res.stdout.splitlines()[-1].startswith('hpcnet: FAILED: history: ')

    found = history.load(db=db, system='testbed', name='hpcnet_p2p')
    assert len(found.sessions) == SESSIONS
    by_metric = {s.key[3]: s for s in found.series}
    raw = by_metric['bandwidth_4MiB']
    (change,) = raw.finding.changes
    session = raw.sessions[change.position]
    assert abs(session.index - CHANGE_AT) <= 1, history_text.change_line(raw, change)
    # 450 Mbit/s over 700 Mbit/s: -36 %.
    assert raw.worse(change) and -0.45 < change.size < -0.15, history_text.change_line(raw, change)
    assert change.p_value < levels.ALPHA
    # What the runs recorded that session: the declared rate, and the shaper
    # the calibration read on the nodes.
    assert 'link rate: 700000000 -> 450000000' in history_text.changed_near(raw, change), raw.changed
    assert 'link shaped (tc): 700 Mbit/s -> 450 Mbit/s' in history_text.changed_near(raw, change)
    line = history_text.change_line(raw, change)
    assert line in res.stdout
    # One slow session is an outlier, never a change (a stall of the shared
    # host may add another outlier: it is printed, not a failure), or, where
    # the host was too busy to emulate its wire, a night shown as withheld.
    outliers = {raw.sessions[o.position].index: o for o in raw.finding.outliers}
    busy = [s.index for s, _ in raw.busy]
    assert OUTLIER_AT in outliers or OUTLIER_AT in busy, \
        [history_text.outlier_line(raw, o) for o in raw.finding.outliers]
    if OUTLIER_AT in outliers:
        assert history_text.outlier_line(raw, outliers[OUTLIER_AT]) in res.stdout
        assert 'link rate: 700000000 -> 250000000' in raw.changed[outliers[OUTLIER_AT].position]
    # What the cut does not make worse: iperf3 on the same link fell as much,
    # and the efficiency is over the rate the partition declares (a slower
    # wire the host emulates fully may show as better).
    for metric in ('bandwidth_4MiB' + CALIBRATED_SUFFIX, 'efficiency_4MiB'):
        series = by_metric[metric]
        assert not [c for c in series.finding.changes if series.worse(c)], \
            [history_text.change_line(series, c) for c in series.finding.changes]
    assert 'id="trend"' in (tmp_path / 'trend.html').read_text()
    (tmp_path / 'history.json').write_text(json.dumps([s.report for s in found.sessions]))
