"""`hpcnet report`: one self-contained HTML page a site engineer reads after
a run.  Its first screen is the answer: the verdict in the exit-code
contract's words with system, date and suite commit; then what failed,
regressed or was not decided, each with its reason; skipped and not-judged
cases counted by reason; the verdict matrix cut down to the cells that are
not plain passes.  Below it, the evidence: message-size curves with their
spread, the node-pair heatmaps with culprit nodes and links marked and named, collectives, TCP / UDP /
MPI throughput of one link, the sections a system's site file adds
(hpcnet.siteconfig.sites.REPORT_SECTIONS), efficiency against the wire, and
provenance.  A comparison adds
before/after curves overlaid with a ratio panel and the verdict table of
`hpcnet compare`.  A section with nothing to show is left out.

Everything is embedded (plots as SVG data URIs, no script or style from
the network), so the file can be mailed or published as a CI artifact.
"""
from __future__ import annotations

import datetime
import re
from collections import defaultdict

from hpcnet.siteconfig import sites
from hpcnet.acceptance.comparison import comparetext
from hpcnet.acceptance.comparison.statcompare import Verdict
from hpcnet.acceptance.references import baseline
from hpcnet.acceptance.references.references import NOT_JUDGED, withheld
from hpcnet.acceptance.report.reportparts import display_name, esc, final_cases
from hpcnet.exitcodes import WORDS, Exit

#: Cell colours of the verdict matrix.
_COLOURS = {'pass': '#c8e6c9', 'fail': '#ffcdd2', 'skip': '#eeeeee', 'not judged': '#fff9c4',
            'retried': '#ffe0b2', 'xfail': '#e1bee7'}
#: Cells that say nothing the lines above the matrix do not: sanity passed
#: (not-judged cases are counted there by reason).
_PLAIN = ('pass', 'not judged')
#: Banner class of each verdict word.
_BANNER = {WORDS[Exit.OK]: 'passed', WORDS[Exit.FAILED]: 'failed', WORDS[Exit.USAGE]: 'failed',
           WORDS[Exit.UNDECIDED]: 'undecided'}
#: Items of one kind on the first screen; the rest are counted, so the
#: matrix stays in view.
_FIRST_SCREEN_ITEMS = 6
#: The page checks itself in a browser: a plot that did not decode, or a
#: script error, marks the body, and so does where the answer ends on the
#: screen (tests/test_report.py reads them back).
_SELF_CHECK = '''<script>
window.addEventListener('error', function () { document.body.dataset.errors = 'script'; });
window.addEventListener('load', function () {
  var bad = Array.prototype.filter.call(document.images, function (i) {
    return !(i.complete && i.naturalWidth > 0); });
  document.body.dataset.plots = document.images.length;
  document.body.dataset.brokenPlots = bad.length;
  ['verdict', 'attention', 'matrix'].forEach(function (id) {
    var e = document.getElementById(id);
    if (e) { document.body.dataset[id + 'Bottom'] = Math.round(e.getBoundingClientRect().bottom); }
  });
});
</script>'''


def _where(tc: dict) -> str:
    return f'{display_name(tc)} @{tc["system"]}:{tc["partition"]} +{tc["environ"]}'


def _verdict(tc: dict, retried: set) -> str:
    if (tc['name'], tc['system'], tc['partition'], tc['environ']) in retried:
        return 'retried'
    if tc['result'] == 'pass' and str(tc.get('judgement', '')).startswith(NOT_JUDGED):
        return 'not judged'
    return tc['result']


def _short(text, limit: int = 320) -> str:
    text = ' '.join(str(text or '').split())
    return text if len(text) <= limit else text[:limit] + ' …'


# --- The first screen: the answer ---------------------------------------

def verdict_word(verdict: str) -> str:
    """The contract's words a verdict line starts with (hpcnet.exitcodes)."""
    for word in sorted(WORDS.values(), key=len, reverse=True):
        if verdict.startswith(word):
            return word
    raise ValueError(f'a verdict line starts with one of {", ".join(WORDS.values())}: '
                     f'{verdict!r}')


def _dates(reports: list) -> str:
    stamps = []
    for r in reports:
        stamp = r.get('session_info', {}).get('time_start')
        try:
            stamps.append(datetime.datetime.strptime(stamp, '%Y%m%dT%H%M%S%z'))
        except (TypeError, ValueError):
            continue
    shown = sorted({s.strftime('%Y-%m-%d %H:%M %Z') for s in stamps})
    return ' … '.join(dict.fromkeys((shown[0], shown[-1]))) if shown else 'date unknown'


def _suite() -> str:
    commit = baseline.suite_commit()
    return f'suite {commit[:12]}' if re.fullmatch('[0-9a-f]{40}', commit) else f'suite: {commit}'


def heading(reports: list, cases: list, verdict: str, what: str) -> tuple:
    """(page title, the verdict section): the verdict word, the systems,
    the date of the sessions and the suite's commit, the verdict line."""
    word = verdict_word(verdict)
    systems = ', '.join(sorted({tc['system'] for tc in cases})) or 'no system'
    where = f'{systems} · {_dates(reports)} · {_suite()}'
    section = (f'<section id="verdict" class="{_BANNER[word]}">'
               f'<h1><span class="word">{esc(word)}</span> <span class="where">{esc(where)}'
               f'</span></h1><p class="line">{esc(verdict)}</p>'
               f'<p class="what">{esc(what)}</p></section>')
    return f'{word} · {where} · {what}', section


def _group(title: str, cls: str, items: list, count: str = '') -> str:
    """One kind of finding: a line per item (what, why), the first few."""
    if not items:
        return ''
    shown = ''.join(f'<li><b>{esc(what)}</b>: <span class="why" title="{esc(why)}">'
                    f'{esc(_short(why))}</span></li>' for what, why in items[:_FIRST_SCREEN_ITEMS])
    more = len(items) - _FIRST_SCREEN_ITEMS
    if more > 0:
        shown += f'<li class="more">… and {more} more (below)</li>'
    return (f'<div class="group {cls}"><h2>{esc(title)} ({esc(count or len(items))})</h2>'
            f'<ul>{shown}</ul></div>')


def _by_case(metrics: list) -> tuple:
    """(items, count) of (case, metric, reason) findings: one item per case
    naming its metrics with the first one's reason (a case's metrics mostly
    share theirs), and how many metrics in how many cases."""
    cases = defaultdict(list)
    for case, metric, reason in metrics:
        cases[case].append((metric, reason))
    items = [(case, f'{", ".join(m for m, _ in ms[:4])}{" …" if len(ms) > 4 else ""}: {ms[0][1]}')
             for case, ms in sorted(cases.items())]
    return items, f'{len(metrics)} metrics in {len(cases)} cases'


def findings(cases: list, retried: set, outcome=None) -> str:
    """What failed, regressed or was not decided, each with its reason;
    cases that passed only when run again for a named known issue."""
    failed, on_retry = [], []
    for tc in sorted(cases, key=_where):
        if _verdict(tc, retried) == 'retried':
            first = tc.get('fail_reason') or tc.get('judgement') or tc['result']
            on_retry.append((_where(tc), f'first attempt: {first}'))
        elif tc['result'] not in ('pass', 'skip'):
            # A pair case names what it blames beside why it failed.
            blamed = f' ({tc["attribution"]})' if tc.get('attribution') else ''
            failed.append((_where(tc), (tc.get('fail_reason') or tc['result']) + blamed))
    regressed, undecided = [], []
    if outcome is not None:
        for row in outcome.rows:
            case = f'{row.test} @{row.partition} +{row.environ}'
            if row.result.verdict == Verdict.REGRESSED:
                changed = f'; what changed: {" | ".join(row.changed)}' if row.changed else ''
                regressed.append((case, row.metric, row.result.reason + changed))
            elif row.result.verdict == Verdict.INCONCLUSIVE:
                undecided.append((case, row.metric, row.result.reason))
        regressed += [(f'{k[0]} @{k[1]} +{k[2]}', k[3], 'measured before, missing after: the '
                       'case failed or did not run') for k in outcome.missing_after]
        undecided += [(f'{k[0]} @{k[1]} +{k[2]}', k[3], 'measured only after: nothing to '
                       'compare it with') for k in outcome.only_after]
    out = _group('Failed', 'failed', failed) + _group('Regressed', 'failed', *_by_case(regressed))
    if cases and all(tc['result'] == 'skip' for tc in cases):
        out += _group('Not decided', 'undecided',
                      [('nothing ran', 'every selected case was skipped')])
    out += (_group('Not decided', 'undecided', *_by_case(undecided))
            + _group('Passed only when run again (a named known issue, or a host too busy to '
                     'judge it)', 'retried', on_retry))
    return out or '<p class="clean">Nothing failed, regressed or is undecided.</p>'


def skips(cases: list) -> str:
    """Skipped and not-judged cases: one line per reason, with a count."""
    lines = defaultdict(int)
    for tc in cases:
        if tc['result'] == 'skip':
            lines[('SKIPPED', tc.get('skip_reason') or 'no reason recorded')] += 1
        elif tc['result'] == 'pass' and str(tc.get('judgement', '')).startswith(NOT_JUDGED):
            lines[('NOT JUDGED', tc['judgement'][len(NOT_JUDGED):].lstrip(': '))] += 1
    if not lines:
        return ''
    return '<ul class="reasons">' + ''.join(
        f'<li><b>{kind} ({n})</b>: <span class="why">{esc(_short(why))}</span></li>'
        for (kind, why), n in sorted(lines.items(), key=lambda kv: (kv[0][0], -kv[1]))) + '</ul>'


def _column(tc: dict) -> str:
    return f'{tc["system"]}:{tc["partition"]} {tc["environ"]}'


def verdict_matrix(cases: list, retried: set, notable_only: bool = False) -> str:
    """Checks by partition x environment; ``notable_only`` keeps the rows
    and columns that hold a cell other than a plain pass."""
    rows = defaultdict(dict)
    for tc in cases:
        rows[display_name(tc)][_column(tc)] = tc
    columns = sorted({_column(tc) for tc in cases})
    if notable_only:
        notable = [tc for tc in cases if _verdict(tc, retried) not in _PLAIN]
        rows = {name: row for name, row in rows.items() if name in {display_name(tc) for tc in notable}}
        columns = sorted({_column(tc) for tc in notable})
    if not rows:
        return ''
    head = (''.join(f'<th>{esc(c.split(" ")[0])}<br>{esc(c.split(" ")[1])}</th>' for c in columns)
            if notable_only else ''.join(f'<th class="v">{esc(c)}</th>' for c in columns))
    out = [f'<table class="matrix"><tr><th>check</th>{head}</tr>']
    for name in sorted(rows):
        cells = []
        for col in columns:
            tc = rows[name].get(col)
            if tc is None:
                cells.append('<td></td>')
                continue
            v = _verdict(tc, retried)
            why = ((tc.get('skip_reason') or 'no reason recorded') if v == 'skip' else
                   tc.get('fail_reason') or tc.get('judgement') or v)
            cells.append(f'<td style="background:{_COLOURS.get(v, "#fff")}" title="{esc(why)}">'
                         f'{esc(v)}</td>')
        out.append(f'<tr><th>{esc(name)}</th>{"".join(cells)}</tr>')
    return '\n'.join(out) + '</table>'


def matrix_section(cases: list, retried: set) -> str:
    counts = defaultdict(int)
    for tc in cases:
        counts[_verdict(tc, retried)] += 1
    summary = ', '.join(f'{n} {v}' for v, n in sorted(counts.items()))
    notable = verdict_matrix(cases, retried, notable_only=True)
    return ((notable or '<p>Every case passed its sanity check.</p>')
            + f'<details><summary>All {len(cases)} cases: {esc(summary)}</summary>'
            + verdict_matrix(cases, retried) + '</details>')


def site_sections(reports: list) -> list:
    """(heading, anchor, content) of each section the site file of a
    session's system adds (sites.REPORT_SECTIONS): what it shows of every
    session on that system, preformatted."""
    out = []
    for site in sites.load_site_files(*sites.system_directories()):
        mine = [r for r in reports
                if any(tc['system'] == site.system['name'] for tc in final_cases([r]))]
        for heading, anchor, section in site.report_sections if mine else ():
            texts = [text for text in map(section, mine) if text]
            out.append((heading, anchor, '\n'.join(f'<pre>{esc(t)}</pre>' for t in texts)))
    return out


def efficiencies(cases: list) -> str:
    rows = []
    for tc in cases:
        for key, val in (tc.get('perfvalues') or {}).items():
            if key.split(':')[-1].startswith('efficiency') and val[0] is not None:
                rows.append(f'<tr><td>{esc(display_name(tc))}</td><td>{esc(tc["system"])}:'
                            f'{esc(tc["partition"])}</td><td>{esc(tc["environ"])}</td>'
                            f'<td>{esc(key.split(":")[-1])}</td><td>{val[0]:.3f}</td></tr>')
    if not rows:
        return ''
    return ('<table><tr><th>check</th><th>partition</th><th>environment</th><th>metric</th>'
            '<th>of the wire</th></tr>' + ''.join(rows) + '</table>')


def provenance(reports: list, cases: list) -> str:
    libs = defaultdict(set)
    for tc in cases:
        for key in ('mpi_spec', 'mpi_library', 'transport'):
            if tc.get(key) and tc[key] != 'none':
                libs[tc['environ']].add(f'{key}: {tc[key]}')
    sessions = ''.join(
        f'<li>{esc(r.get("session_info", {}).get("uuid", "?"))}: '
        f'{esc(r.get("session_info", {}).get("time_start", ""))} on '
        f'{esc(r.get("session_info", {}).get("hostname", ""))}, ReFrame '
        f'{esc(r.get("session_info", {}).get("version", ""))}, '
        f'{len(r.get("runs", []))} run(s)</li>' for r in reports)
    envs = ''.join(f'<li><b>{esc(env)}</b><br>' + '<br>'.join(esc(x) for x in sorted(v))
                   + '</li>' for env, v in sorted(libs.items()))
    nodes = sorted({n for tc in cases for n in (tc.get('job_nodelist') or [])})
    return (f'<p>{esc(_suite())}</p><ul>{sessions}</ul>'
            f'<p>nodes: {esc(", ".join(nodes) or "local")}</p><ul>{envs}</ul>')


def comparison(rows: list, before_side, after_side) -> str:
    """The verdict table of `hpcnet compare` and before/after curves with a
    ratio panel for every point-to-point case both sides ran."""
    from hpcnet.acceptance.report import reportplots   # matplotlib: only where a page is drawn
    return (f'<pre>{esc(comparetext.table(rows))}</pre>'
            + reportplots.before_after_curves(before_side, after_side))


_STYLE = '''<style>
body { font-family: sans-serif; margin: 0 1.5em 1.5em; color: #222; font-size: 14px; }
#verdict { margin: 0 -1.5em 0.6em; padding: 0.5em 1.5em 0.4em; border-bottom: 4px solid; }
#verdict.failed { background: #ffebee; border-color: #c62828; }
#verdict.undecided { background: #fff8e1; border-color: #f9a825; }
#verdict.passed { background: #e8f5e9; border-color: #2e7d32; }
#verdict h1 { margin: 0; font-size: 20px; font-weight: normal; }
#verdict .word { font-size: 34px; font-weight: bold; margin-right: 0.4em; }
#verdict.failed .word { color: #b71c1c; } #verdict.undecided .word { color: #e65100; }
#verdict.passed .word { color: #1b5e20; }
#verdict p { margin: 0.2em 0; } #verdict .what { color: #555; font-size: 12px; }
h2 { font-size: 17px; margin: 0.8em 0 0.3em; }
.group h2 { font-size: 15px; margin: 0.5em 0 0.2em; }
.group.failed h2 { color: #b71c1c; } .group.undecided h2, .group.retried h2 { color: #e65100; }
.group ul, ul.reasons { margin: 0; padding-left: 1.3em; } li { margin: 0.15em 0; }
.why { font-family: monospace; font-size: 12px; }
.more { color: #555; list-style: none; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #ccc; padding: 2px 5px; text-align: left; }
th.v { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; }
details summary { cursor: pointer; margin: 0.4em 0; color: #1565c0; }
nav { margin: 0.8em 0; font-size: 13px; } nav a { margin-right: 1em; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 6px; }
.plots img { width: 100%; }
img { max-width: 100%; }
pre { font-size: 12px; background: #f6f6f6; padding: 6px; overflow-x: auto; }
figure { display: inline-block; margin: 4px; }
</style>'''


def render(reports: list, retried: set | None = None, *, verdict: str,
           title: str = 'hpcnet report', comparison_of: tuple | None = None,
           trend: str = '', drawn: list | None = None) -> str:
    """The whole page.  ``verdict`` is the line that states the verdict in
    the exit-code contract's words (verdict.summary's last line, say);
    ``title`` says what produced the sessions; ``comparison_of`` is
    (outcome, before side, after side) of a comparison, whose after side's
    cases are the ones judged; ``retried`` (default: read from the judged
    reports) holds the cases that passed only when run again; ``trend``, the
    trend section of `hpcnet history` (hpcnet.acceptance.history.trend), comes
    right after the verdict, which is the history's; ``drawn``: the
    evidence of ``reports`` where it was drawn already (evidence())."""
    outcome, before, after = comparison_of or (None, None, None)
    judged_reports = after.reports if after else reports
    judged = final_cases(judged_reports)
    if retried is None:
        retried = set().union(*(retried_keys(r) for r in judged_reports))
    page_title, answer = heading(reports, judged, verdict, title)
    first = [('Trend over the sessions', 'trend', trend),
             ('', 'attention', findings(judged, retried, outcome)),
             ('Skipped and not judged, by reason', 'reasons', skips(judged)),
             ('Verdicts: the cells that are not plain passes', 'matrix',
              matrix_section(judged, retried))]
    shown = evidence(reports, comparison_of) if drawn is None else drawn
    nav = ('<nav>Below: ' + ''.join(f'<a href="#{a}">{esc(h)}</a>' for h, a, _ in shown)
           + '</nav>')
    body = '\n'.join(f'<section id="{a}">{f"<h2>{esc(h)}</h2>" if h else ""}\n{content}'
                     '</section>' for h, a, content in first if content)
    body += nav + '\n'.join(f'<section id="{a}"><h2>{esc(h)}</h2>\n{content}</section>'
                            for h, a, content in shown)
    return f'''<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(page_title)}</title>
{_STYLE}{_SELF_CHECK}</head>
<body>{answer}
{body}
</body></html>
'''


def evidence(reports: list, comparison_of: tuple | None = None) -> list:
    """(heading, anchor, HTML) of each evidence section of ``reports`` that
    has something to show: the figures and tables below the verdict.  Most
    of a page's drawing is here, and it needs no judgement, so `hpcnet
    history` draws it while the series are judged."""
    from hpcnet.acceptance.report import reportplots   # matplotlib: only where a page is drawn
    outcome, before, after = comparison_of or (None, None, None)
    cases = final_cases(reports)
    sections = [('Before and after', 'compare',
                 comparison(outcome.rows, before, after) if outcome else ''),
                ('Point-to-point: the whole message-size curve', 'p2p',
                 reportplots.p2p_curves(cases)),
                ('Node pairs', 'pairs', reportplots.pair_heatmaps(cases)),
                ('Collectives', 'collectives', reportplots.collective_curves(cases)),
                ('One link: TCP, UDP and MPI', 'link', reportplots.link_throughput(reports)),
                *site_sections(reports),
                ('Efficiency against the wire', 'efficiency', efficiencies(cases)),
                ('Provenance', 'provenance', provenance(reports, cases))]
    return [s for s in sections if s[2]]


def retried_keys(report: dict) -> set:
    """The cases decided only when run again: passed, and judged if a busy
    host was why."""
    return {(tc['name'], tc['system'], tc['partition'], tc['environ'])
            for tc in report.get('hpcnet_retried', []) if tc.get('result') == 'pass'
            and not withheld(tc)}
