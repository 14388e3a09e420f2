"""The changes a site accepted, for `hpcnet history`: a change accepted
starts a new level, so the nights after it are not red while it lies in the
period.

Two records accept a change:

- a baseline the site wrote: each provenance block of the system's reference
  file (``$provenance`` and its ``earlier`` list) names the sessions it was
  made of and when it was written; it accepts what was measured up to its
  newest session (up to the date it was written when none of its sessions is
  in the history read);
- an acknowledgement: ``hpcnet history --acknowledge SESSION[:REGEX] --why
  TEXT`` appends ``{session, metrics, why, date}`` to ACKNOWLEDGED under the
  reference directory (beside the reference files, kept with them; a
  subdirectory, so reference validation does not read it).  It accepts what
  the series whose name (``test @partition +environment metric``) REGEX
  finds (every series without one) measured up to SESSION.
"""
from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from hpcnet.acceptance.references.references import PROVENANCE, reference_dir, reference_file
from hpcnet.yamlfile import YamlFileError, load_yaml

#: The acknowledgements file, under the reference directory.
ACKNOWLEDGED = Path('acknowledged') / 'history.yaml'
_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
_HEADER = ('# Changes the site accepted, for `hpcnet history` '
           '(hpcnet.acceptance.references.accepted_changes):\n'
           '# each accepts what the series REGEX finds measured up to SESSION.\n'
           '# Added by `hpcnet history --acknowledge SESSION[:REGEX] --why TEXT`.\n')


class AcceptedError(ValueError):
    """An acknowledgement that cannot be read or made: a usage error (exit 2)."""


@dataclass(frozen=True)
class Acceptance:
    """Up to which session a site accepted the values of some series."""
    sessions: tuple         #: session uuids; the newest of them in the history is the point
    metrics: str | None     #: regex on the series' names (None: every series)
    why: str
    #: A baseline's ISO time of writing: the point when none of its sessions is read.
    date: str | None = None
    system: str | None = None  #: only the series of this system (a baseline's)
    #: The checks (test classes) a baseline measured; None where its block
    #: does not list them (written by hand).
    checks: frozenset | None = None

    def covers(self, name: str, partition: str) -> bool:
        if self.system is not None and partition.split(':')[0] != self.system:
            return False
        return self.metrics is None or re.search(self.metrics, name) is not None


def acknowledged_path(refdir: Path | None = None) -> Path:
    return (refdir or reference_dir()) / ACKNOWLEDGED


def parse_spec(spec: str) -> tuple:
    """(session uuid, regex or None) of ``SESSION[:REGEX]``."""
    uuid, _, pattern = spec.partition(':')
    if not _UUID.fullmatch(uuid):
        raise AcceptedError(f'--acknowledge {spec}: {uuid!r} is not a session UUID (valid: '
                            'SESSION_UUID[:REGEX], the session `hpcnet history` names)')
    try:
        re.compile(pattern)
    except re.error as err:
        raise AcceptedError(f'--acknowledge {spec}: {pattern!r} is not a regular expression '
                            f'({err})') from None
    return uuid, pattern or None


def acknowledgements(path: Path) -> list:
    """The acknowledgements of ``path`` (none when it does not exist)."""
    if not path.is_file():
        return []
    try:
        entries = load_yaml(path) or []
    except YamlFileError as err:
        raise AcceptedError(f'the acknowledgements {err}') from None
    if not isinstance(entries, list):
        raise AcceptedError(f'{path}: not a list of acknowledgements (valid: a YAML list of '
                            '{session, metrics, why, date})')
    out = []
    for number, entry in enumerate(entries, 1):
        where = f'{path}: entry {number}'
        if not isinstance(entry, dict) or not _UUID.fullmatch(str(entry.get('session', ''))):
            raise AcceptedError(f'{where}: session: not a session UUID (valid: the session '
                                '`hpcnet history` names)')
        if not str(entry.get('why') or '').strip():
            raise AcceptedError(f'{where}: why: missing (valid: the reason the change is accepted)')
        metrics = entry.get('metrics')
        try:
            re.compile(metrics or '')
        except (re.error, TypeError) as err:
            raise AcceptedError(f'{where}: metrics: {metrics!r} is not a regular expression '
                                f'({err})') from None
        # An acknowledgement accepts up to its session only: its date, when it
        # was recorded, would accept the changes of a later period too.
        out.append(Acceptance((entry['session'],), metrics or None, str(entry['why'])))
    return out


def acknowledge(path: Path, session: str, metrics: str | None, why: str) -> Acceptance:
    """Append an acknowledgement to ``path`` (created with its header)."""
    if not why.strip():
        raise AcceptedError('--why: empty (valid: the reason the change is accepted, for the record)')
    entry = {'session': session, 'metrics': metrics, 'why': why.strip(),
             'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}
    acknowledgements(path)          # the file must be readable before it grows
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text() if path.is_file() else _HEADER
        path.write_text(text + yaml.safe_dump([entry], sort_keys=False, width=100))
    except OSError as err:
        raise AcceptedError(f'{path}: cannot write the acknowledgement: {err.strerror}') from None
    return Acceptance((session,), metrics, entry['why'])


def baselines(systems: set, refdir: Path | None = None) -> list:
    """An Acceptance per provenance block of each system's reference file."""
    out = []
    for system in sorted(systems):
        path = reference_file(system, refdir or reference_dir())
        if not path.is_file():
            continue
        try:
            document = load_yaml(path) or {}
        except YamlFileError as err:
            raise AcceptedError(f'its {PROVENANCE}: {err}') from None
        block = document.get(PROVENANCE) if isinstance(document, dict) else None
        if not isinstance(block, dict):
            continue
        for b in [block, *(block.get('earlier') or [])]:
            sessions = tuple(str(s) for s in b.get('sessions') or [])
            updated = b.get('updated')
            if sessions or b.get('date'):
                out.append(Acceptance(sessions, None, f'baseline written to {path}',
                                      str(b.get('date') or '') or None, system,
                                      frozenset(updated) if isinstance(updated, dict) else None))
    return out
