"""hpcnet report: one self-contained HTML page whose first screen is the
answer, rendered for real in headless Chromium (Debian's `chromium`), which
must show every plot and run its script without an error."""
import argparse
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from hpcnet.session import verdict
from hpcnet.acceptance.comparison import compare, sides
from hpcnet.acceptance.report import report, reportparts, reportplots
from hpcnet.commands import report as report_command

RECORDED = Path(__file__).parent / 'data' / 'reports' / 'local-run.json'
#: The first screen a person sees, and where its screenshot is kept to look at.
VIEWPORT = (1400, 900)
SCREENSHOT = Path('/tmp/report-first-viewport.png')


def _verdict(data: dict) -> str:
    '''The verdict line `hpcnet report` gives a report: verdict.summary's last.'''
    final = {(tc['name'], tc['system'], tc['partition'], tc['environ']): tc
             for run in data['runs'] for tc in run['testcases']}
    retried = [{'attempts': '?', **tc} for tc in data.get('hpcnet_retried', [])]
    return verdict.summary(final, retried)[0][-1]


@pytest.fixture(scope='module')
def page(tmp_path_factory) -> Path:
    '''The recorded full run rendered once; its size and render time printed
    (a time is a machine's, so it is shown, not asserted).'''
    data = json.loads(RECORDED.read_text())
    start = time.perf_counter()
    text = report.render([data], report.retried_keys(data), verdict=_verdict(data),
                         title='hpcnet run: (recorded local run)')
    seconds = time.perf_counter() - start
    print(f'\nrendered {RECORDED.name} ({len(reportparts.final_cases([data]))} cases): '
          f'{len(text.encode()) / 1000:.0f} KB in {seconds:.2f} s')
    out = tmp_path_factory.mktemp('report') / 'report.html'
    out.write_text(text)
    return out


def _chromium(*args, timeout=120) -> subprocess.CompletedProcess:
    browser = shutil.which('chromium')
    assert browser, 'Debian package chromium is not installed (.ci/run installs it)'
    return subprocess.run([browser, '--headless', '--no-sandbox', '--disable-gpu',
                           '--hide-scrollbars', '--virtual-time-budget=5000', *args], text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


def test_the_first_section_is_the_verdict_then_what_failed(page):
    text = page.read_text()
    body = text[text.index('<body'):]
    verdict = re.search(r'<section id="verdict"[^>]*>(.*?)</section>', body).group(1)
    # The page opens with the verdict, before any plot or matrix.
    assert re.match(r'<body[^>]*>\s*<section id="verdict"', body)
    assert body.index('id="verdict"') < body.index('<img') and \
        body.index('id="verdict"') < body.index('class="matrix"')
    # Its words are the exit-code contract's; where, when and which suite.
    assert '<span class="word">FAILED</span>' in verdict
    assert 'local · 2026-11-23 06:10 UTC · suite ' in verdict and 'FAILED: 1 fail' in verdict
    assert re.search(r'<title>FAILED · local · 2026-11-23', text)
    # What failed comes next, with its reason; then the case that passed
    # only when run again; all before the first plot.
    first_plot = body.index('<img')
    failed = body.index('Failed (1)')
    assert failed < body.index('MPI_Finalize did not return') < first_plot
    assert failed < body.index('Passed only when run again') < first_plot
    # Skipped and not-judged: one line per reason with its count.
    assert body.count('NOT JUDGED (') == 1 and 'NOT JUDGED (82)</b>' in body
    assert 'SKIPPED (1)</b>: <span class="why">no reason recorded' in body
    # The matrix shows the cells that are not plain passes; all of them
    # wait behind <details>.
    notable = re.search(r'<section id="matrix">.*?<table class="matrix">(.*?)</table>', body,
                        re.S).group(1)
    assert notable.count('<tr>') == 4 and '>not judged<' not in notable   # header + 3 rows
    assert '>retried</td>' in notable and '>fail</td>' in notable and '>skip</td>' in notable
    assert re.search(r'<details><summary>All 85 cases: [^<]*</summary><table class="matrix">',
                     body)


def test_the_page_is_self_contained_small_and_without_sections_that_do_not_apply(page):
    text = page.read_text()
    # Nothing from the network: plots are data URIs, no external script or style.
    assert not re.search(r'(src|href)="(https?:)?//', text)
    assert text.count('src="data:image/svg+xml,') >= 10
    assert len(text.encode()) < 500_000
    for section in ('Point-to-point: the whole message-size curve', 'Collectives', 'Provenance'):
        assert f'<h2>{section}</h2>' in text
    # One node: no pair matrix; no wire rate; a site's run is not the paper's.
    for absent in ('Node pairs', 'Efficiency against the wire', 'One link: TCP, UDP and MPI',
                   'The Rocks cluster paper, Tables I-IV', 'Before and after'):
        assert f'<h2>{absent}</h2>' not in text and f'>{absent}</a>' not in text


def test_a_site_file_adds_its_sections_to_its_own_sessions_only():
    # The testbed's site file adds the Rocks paper's tables (config/systems/testbed.py).
    curve = [{'size_bytes': size, 'median_us': 50.0} for size in (512, 2048)]
    case = {'name': 'hpcnet_p2p %scale=2_nodes %mode=pingpong', 'scale': '2_nodes',
            'mode': 'pingpong', 'result': 'pass', 'partition': 'eth', 'environ': 'gcc12-openmpi4',
            'curve': curve}
    testbed = {'runs': [{'testcases': [{**case, 'system': 'testbed'}]}]}
    site = {'runs': [{'testcases': [{**case, 'system': 'cluster'}]}]}
    ((heading, anchor, content),) = report.site_sections([testbed, site])
    assert (heading, anchor) == ('The Rocks cluster paper, Tables I-IV', 'paper')
    assert content.count('<pre>') == 1 and 'IMB PingPong over Gigabit Ethernet' in content
    assert report.site_sections([site]) == []
    page = report.render([testbed], verdict='PASSED: 1 pass')
    assert '<h2>The Rocks cluster paper, Tables I-IV</h2>' in page and '>The Rocks cluster paper' \
        ', Tables I-IV</a>' in page


def test_chromium_shows_the_verdict_in_the_first_viewport(page):
    size = f'--window-size={VIEWPORT[0]},{VIEWPORT[1]}'
    dom = _chromium(size, '--dump-dom', page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r'<body[^>]*>', dom.stdout).group(0)
    assert 'data-errors' not in body, body
    plots = int(re.search(r'data-plots="(\d+)"', body).group(1))
    assert plots >= 10 and 'data-broken-plots="0"' in body, body
    # Laid out at the viewport's size, the verdict, what failed and the
    # collapsed matrix all end above its bottom edge.
    for part in ('verdict', 'attention', 'matrix'):
        bottom = int(re.search(rf'data-{part}-bottom="(\d+)"', body).group(1))
        assert 0 < bottom <= VIEWPORT[1], (part, bottom)
    SCREENSHOT.unlink(missing_ok=True)
    shot = _chromium(f'--screenshot={SCREENSHOT}', size, page.as_uri())
    assert shot.returncode == 0 and SCREENSHOT.stat().st_size > 50_000, shot.stderr[-2000:]


def test_a_comparison_page_says_what_regressed_or_is_undecided_first():
    side = sides.load_side(str(RECORDED))
    outcome = compare.compare(side, side)
    html = report.render(side.reports * 2, verdict=f'NOT DECIDED: {outcome.summary()}',
                         comparison_of=(outcome, side, side))
    assert '<h2>Before and after</h2>' in html
    first_screen = html[:html.index('<h2>Before and after</h2>')]
    assert 'after/before' not in first_screen and '<img' not in first_screen
    undecided = re.search(r'<h2>Not decided \((\d+) metrics in (\d+) cases\)</h2>', first_screen)
    assert undecided and int(undecided.group(1)) == outcome.count('inconclusive'), first_screen
    # The known-issue case that passed on its retry is not a failure here either.
    assert 'Passed only when run again' in first_screen


def test_an_empty_plot_is_left_out_not_drawn_empty():
    assert reportplots._curve_plot('nothing', {'env': [[{'size_bytes': 0, 'median_us': 0}]]},
                              'size_bytes', 'median_us', 'us') == ''


def test_skipped_cases_are_counted_by_reason():
    gap = 'gcc12-impi2021 cannot use fabric tcp on this host: libfabric.so.1 not found: ' \
          'Debian package libfabric1'
    case = {'name': 'hpcnet_p2p %scale=1_node %mode=bw', 'display_name': 'hpcnet_p2p bw',
            'system': 'local', 'partition': 'tcp', 'environ': 'gcc12-impi2021'}
    cases = [{**case, 'result': 'skip', 'skip_reason': gap},
             {**case, 'result': 'skip', 'skip_reason': gap, 'environ': 'gcc11-impi2021'},
             {**case, 'result': 'pass', 'partition': 'shm'}]
    html = report.skips(cases)
    assert html.count('<li>') == 1 and 'SKIPPED (2)' in html and 'Debian package libfabric1' in html
    assert report.skips(cases[2:]) == ''


def test_hpcnet_report_names_its_page_after_what_it_renders(tmp_path, monkeypatch, capsys):
    '''latest.html for the latest run (the page the run wrote), else
    report-<first session>.html, so no page overwrites another's.'''
    monkeypatch.setenv('HPCNET_REPORTS_DIR', str(tmp_path))
    monkeypatch.setattr(report, 'render', lambda *args, **kwargs: 'page')
    shutil.copyfile(RECORDED, tmp_path / 'latest.json')
    for sessions, name in (([], 'latest.html'), ([str(tmp_path / 'latest.json')], 'latest.html'),
                           ([str(RECORDED)], 'report-dda084f9.html')):
        args = argparse.Namespace(sessions=sessions, compare=None, output=None)
        # It exits with the verdict it prints: the recorded run's.
        assert report_command.run(args) == verdict.reports_summary([json.loads(
            RECORDED.read_text())])[1]
        assert f'HTML report: {tmp_path / name}' in capsys.readouterr().out
        assert (tmp_path / name).read_text() == 'page'
    assert sorted(p.name for p in tmp_path.glob('*.html')) == ['latest.html',
                                                             'report-dda084f9.html']


def test_provenance_names_each_environments_spack_spec():
    '''A case run on a Spack-built MPI logs its spec (the check's mpi_spec);
    the provenance section names it beside the library the MPI reported.'''
    data = json.loads(RECORDED.read_text())
    cases = [dict(tc) for run in data['runs'] for tc in run['testcases']]
    spec = 'openmpi@4.1.4 %gcc@12.2.0 /wlpcv5h'
    for tc in cases:
        if tc['environ'] == 'gcc12-openmpi4':
            tc['mpi_spec'] = spec
    html = report.provenance([data], cases)
    env = re.search(r'<li><b>gcc12-openmpi4</b>(.*?)</li>', html).group(1)
    assert f'mpi_spec: {spec}' in env and 'mpi_library: ' in env
    assert html.count('mpi_spec: ') == 1
