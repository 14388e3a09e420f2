"""The report's trend section (`hpcnet history --output`): one small plot per
metric with a finding (its value in each session, the change points marked,
the level before and after each, the newest nights that stand apart, the
nights measured on a busy host as "not decided" crosses), every finding
with what its session recorded differently, and a table of the sessions
with the provenance each changed."""
from __future__ import annotations

import matplotlib

matplotlib.use('Agg')   # no display: files only
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

from hpcnet.longwork import forked  # noqa: E402
from hpcnet.acceptance.history import history as hist, stored_series  # noqa: E402
from hpcnet.acceptance.history import history_text as htext  # noqa: E402
from hpcnet.acceptance.history.levels import Outlier  # noqa: E402
from hpcnet.acceptance.report.figures import img  # noqa: E402
from hpcnet.acceptance.report.reportparts import esc  # noqa: E402

#: Plots drawn at most; the other changed metrics are in the table only,
#: so a night when everything moved still gives a page of a few hundred KB.
MAX_PLOTS = 24
#: Fewest plots per process where they are drawn over several cores.
PLOTS_PER_WORKER = 6
_WORSE, _BETTER, _OUTLIER, _SERIES, _BUSY = '#c62828', '#2e7d32', '#ef6c00', '#1565c0', '#757575'


def plot(series: stored_series.Series) -> str:
    """A series against its session numbers: each level's median as a line
    over its sessions, a dashed line at each change (red when worse, green
    when better), outliers circled."""
    x = [s.index for s in series.sessions]
    fig, ax = plt.subplots(figsize=(4.6, 2.5))
    fig.subplots_adjust(left=0.16, right=0.98, bottom=0.19, top=0.83)
    ax.plot(x, series.values, marker='.', lw=0.8, color=_SERIES)
    finding = series.finding
    # A series whose every measurement was withheld has no fair session: no level to draw.
    for start, end, level in (lv for lv in finding.levels if lv[1] > lv[0]):
        ax.hlines(level, x[start] - 0.4, x[end - 1] + 0.4, color='grey', lw=1.6, alpha=0.7)
    for change in finding.changes:
        colour = _WORSE if series.worse(change) else _BETTER
        ax.axvline(x[change.position] - 0.5, color=colour, ls='--', lw=1.2)
        ax.annotate(htext.levels_text(change),
                    (x[change.position] - 0.5, ax.get_ylim()[1]), xytext=(3, -10),
                    textcoords='offset points', color=colour, fontsize=8)
    for outlier in finding.outliers:
        ax.plot([x[outlier.position]], [outlier.value], 'o', mfc='none', mec=_OUTLIER, ms=9)
    for end in (finding.tail, finding.head):
        if end:
            ax.axvspan(x[end.start] - 0.5, x[end.end - 1] + 0.5, alpha=0.15,
                       color=_WORSE if series.worse(end) == (end is finding.tail) else _BETTER)
    if series.busy:
        ax.plot([s.index for s, _ in series.busy], [v for _, v in series.busy], 'x', color=_BUSY,
                ms=7, label='measurement withheld: not decided')
        ax.legend(fontsize=6, loc='lower left')
    test, partition, environ, metric = series.key
    ax.set_title(f'{metric} · {test}\n@{partition} +{environ}', fontsize=7.5)
    ax.set_xlabel('session', fontsize=8)
    ax.set_ylabel(series.unit, fontsize=8)
    ax.tick_params(labelsize=7)
    return img(fig)


def _rows(found: hist.History) -> list:
    """(class, words, series, Session, what, provenance) of every finding."""
    rows = []
    for series, change in found.changes(worse=True) + found.changes(worse=False):
        word = 'worse' if series.worse(change) else 'better'
        rows.append((word, f'changed, {word}', series, series.sessions[change.position],
                     f'{htext.levels_text(change)}, '
                     f'p={change.p_value:.2g}, {change.n_before}+{change.n_after} sessions',
                     htext.changed_near(series, change)))
    for series, tail in found.tails() + found.tails(worse=False):
        word = 'worse' if series.worse(tail) else 'better'
        rows.append((word, f'{word} the newest {htext.sessions_text(tail.nights)}', series,
                     series.sessions[tail.start], htext.outlier_text(
                         Outlier(tail.start, tail.median, tail.level)),
                     htext.what_changed(series, tail.start)))
    for series, head in found.heads():
        rows.append(('outlier', 'cut short by the period start', series,
                     series.sessions[head.start], f'{htext.level_text(head.median)}, then '
                     f'{htext.level_text(head.level)}: not decided', ''))
    for series in found.stopped():
        rows.append(('worse', 'stopped', series, series.stop.since,
                     f'no value in {len(series.stop.sessions)} sessions',
                     '; '.join(sorted({why for _, why in series.stop.sessions}))))
    for series in found.stopped_acknowledged():
        rows.append(('better', 'stopped, acknowledged', series, series.stop.since,
                     f'no value in {len(series.stop.sessions)} sessions',
                     series.accepted['stop'].why))
    for series, recovery in found.recovered():
        rows.append(('better', 'recovered', series, series.sessions[recovery.end.position],
                     f'back at {htext.level_text(recovery.end.after)} (before the bad period '
                     f'{htext.level_text(recovery.level)}) from '
                     f'{series.sessions[recovery.start.position].label()}',
                     htext.changed_near(series, recovery.end)))
    for series, session, value in found.busy():
        rows.append(('busy', 'measurement withheld: not decided', series, session,
                     htext.level_text(value), ''))
    for series, change in found.changes(accepted=True):
        rows.append(('better', 'accepted', series, series.sessions[change.position],
                     htext.levels_text(change), series.accepted[change.position].why))
    for series, outlier in found.outliers():
        rows.append(('outlier', 'outlier', series, series.sessions[outlier.position],
                     htext.outlier_text(outlier), htext.what_changed(series, outlier.position)))
    return rows


def _findings_table(found: hist.History) -> str:
    rows = _rows(found)
    if not rows:
        return ''
    body = ''.join(
        f'<tr><td class="{cls}">{esc(word)}</td><td>{esc(s.key[3])} [{esc(s.unit)}]<br><small>{esc(s.key[0])} '
        f'@{esc(s.key[1])} +{esc(s.key[2])}</small></td><td>{session.index}<br><small>'
        f'{esc(session.when)}</small></td><td>{esc(what)}</td>'
        f'<td>{esc(provenance)}</td></tr>'
        for cls, word, s, session, what, provenance in rows)
    return ('<table class="trend"><tr><th>finding</th><th>metric</th><th>session</th>'
            f'<th>levels</th><th>what changed that session</th></tr>{body}</table>')


def _sessions_table(found: hist.History) -> str:
    body = ''.join(
        f'<tr><td>{s.index}</td><td>{esc(s.when)}</td><td><code>{esc(s.uuid)}</code></td>'
        f'<td>{"<br>".join(esc(c) for c in found.session_changes(s)) or "—"}</td></tr>'
        for s in found.sessions)
    return ('<details open><summary>The sessions, and what each recorded differently from '
            'the one before</summary><table class="trend"><tr><th>#</th><th>started</th>'
            f'<th>session</th><th>provenance changed</th></tr>{body}</table></details>')


def section(found: hist.History) -> str:
    """The trend section's HTML (hpcnet.acceptance.report.report.render's ``trend``)."""
    changed = []
    for series, _ in (found.changes(worse=True) + found.tails() + found.heads()
                      + found.changes(worse=False) + found.tails(worse=False)
                      + found.recovered()
                      + [(s, None) for s, _, _ in found.busy()]):
        if series not in changed:
            changed.append(series)
    plots = forked.map_in_order(plot, changed[:MAX_PLOTS], per_worker=PLOTS_PER_WORKER)
    more = (f'<p>{len(changed) - MAX_PLOTS} more changed metrics are in the table only.</p>'
            if len(changed) > MAX_PLOTS else '')
    grid = (f'<div class="plots" style="grid-template-columns: repeat(auto-fill, '
            f'minmax(440px, 1fr))">{"".join(plots)}</div>' if plots else '')
    short = found.too_short()
    too_short = (f'<p>{len(short)} metrics have fewer than {found.needed} sessions: too few to '
                 'tell a change.</p>' if short else '')
    return (f'<p>{esc(found.summary())}.</p><p><small>{esc(htext.method(found))}</small></p>'
            f'{grid}{more}{_findings_table(found)}{too_short}{_sessions_table(found)}'
            '<style>table.trend td.worse { background: #ffcdd2; } '
            'table.trend td.better { background: #c8e6c9; } '
            'table.trend td.outlier { background: #ffe0b2; } '
            'table.trend td.busy { background: #e0e0e0; }</style>')
