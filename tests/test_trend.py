"""The trend section of the report (`hpcnet history --output`) over a recorded
history: twelve testbed sessions of one streaming case, the links cut by
10 % from session 8 on and session 4 alone slower still
(tests/data/history/README.md); rendered for real in headless Chromium."""
import json
import re
from pathlib import Path

import pytest
from test_report import VIEWPORT, _chromium

from hpcnet.acceptance.history import history, stored_series, trend
from hpcnet.acceptance.report import report
from hpcnet.metrics import CALIBRATED_SUFFIX
from hpcnet.exitcodes import WORDS, Exit

RECORDED = Path(__file__).parent / 'data' / 'history' / 'testbed-12-sessions.json'
#: Where the screenshot of the trend section is kept to look at.
SCREENSHOT = Path('/tmp/report-trend.png')


@pytest.fixture(scope='module')
def judged() -> history.History:
    sessions, series = stored_series.series_of(json.loads(RECORDED.read_text()), system='testbed')
    return history.judge(sessions, series)


@pytest.fixture(scope='module')
def page(judged, tmp_path_factory) -> Path:
    latest = judged.sessions[-1]
    text = report.render([latest.report], verdict=f'{WORDS[judged.exit_code]}: history: '
                         f'{judged.summary()}', title='hpcnet history (recorded testbed history)',
                         trend=trend.section(judged))
    out = tmp_path_factory.mktemp('trend') / 'trend.html'
    out.write_text(text)
    return out


def test_the_recorded_history_changes_at_the_cut_and_not_at_the_slow_session(judged):
    by_metric = {s.key[3]: s for s in judged.series}
    raw = by_metric['bandwidth_4MiB']
    (change,) = raw.finding.changes
    assert raw.sessions[change.position].index in (7, 8, 9) and raw.worse(change)
    assert 'link rate: 1000000000 -> 900000000' in raw.changed[change.position]
    assert [raw.sessions[o.position].index for o in raw.finding.outliers] == [4]
    assert not by_metric['bandwidth_4MiB' + CALIBRATED_SUFFIX].finding.changes
    assert judged.exit_code == Exit.FAILED


def test_the_trend_section_plots_each_changed_metric_and_tables_the_sessions(page, judged):
    text = page.read_text()
    section = re.search(r'<section id="trend"><h2>Trend over the sessions</h2>(.*?)</section>',
                        text, re.S).group(1)
    # The history's verdict, then its trend, before the latest session's cases.
    assert text.index('id="verdict"') < text.index('id="trend"') < text.index('id="attention"')
    changed = {id(s) for s, _ in judged.changes()}
    assert section.count('<img') == min(len(changed), trend.MAX_PLOTS) > 0
    # Every change and outlier has its row, with what its session recorded.
    assert section.count('<td class="worse">') + section.count('<td class="better">') \
        == len(judged.changes())
    assert section.count('<td class="outlier">') == len(judged.outliers())
    assert 'link rate: 1000000000 -&gt; 900000000' in section
    # One row per session, each with what it changed from the one before.
    sessions = re.search(r'<summary>The sessions.*?</table>', section, re.S).group(0)
    assert sessions.count('<tr><td>') == len(judged.sessions) == 12
    assert len(text.encode()) < 500_000


def test_chromium_shows_the_trend_section(page):
    size = f'--window-size={VIEWPORT[0]},{VIEWPORT[1]}'
    dom = _chromium(size, '--dump-dom', page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r'<body[^>]*>', dom.stdout).group(0)
    assert 'data-errors' not in body and 'data-broken-plots="0"' in body, body
    SCREENSHOT.unlink(missing_ok=True)
    shot = _chromium(f'--screenshot={SCREENSHOT}', size, page.as_uri())
    assert shot.returncode == 0 and SCREENSHOT.stat().st_size > 30_000, shot.stderr[-2000:]


def test_the_trend_section_shows_the_newest_nights_busy_nights_and_stops():
    from test_history import _noisy, judged as judge_nights, nights
    found = judge_nights(nights(_noisy(10) + [('busy', 80.0)] + _noisy(6, seed=3)
                                + [56.0, 56.2] + ['crash']))
    section = trend.section(found)
    assert section.count('<img') == 1
    for word in ('worse the newest 2 sessions', 'measurement withheld: not decided', 'stopped'):
        assert f'>{word}</td>' in section, word


def test_a_series_measured_only_on_a_busy_host_is_plotted_as_its_busy_nights():
    '''Every night withheld (a pipeline run beside a build): no level to
    draw, the busy nights marked, the page made (it once raised IndexError).'''
    from test_history import judged as judge_nights, nights
    found = judge_nights(nights([('busy', 80.0 + i) for i in range(5)]))
    section = trend.section(found)
    assert section.count('<img') == 1
    assert '>measurement withheld: not decided</td>' in section
