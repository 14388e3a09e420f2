"""Which sessions are "the baseline": those the site accepted by writing them
into the reference file its runs read.

`hpcnet baseline` stores each of its sessions tagged ``hpcnet_baseline=<id>``
before it knows whether its references will be written: a tagged session is
a candidate.  The references it writes record their sessions' UUIDs in the
file's ``$provenance`` (``sessions``; a merge keeps the blocks whose entries
still stand under ``earlier``).  The word ``baseline`` of compare, accept
and the nightly templates names exactly those sessions, read from
``<reference dir>/<system>.yaml`` (HPCNET_REFERENCE_DIR, else reference/):
a baseline run "to see the diff", written with ``-o`` elsewhere or into a
scratch reference directory never becomes the baseline of runs that read
the real file.
"""
from __future__ import annotations

import re
from pathlib import Path

from hpcnet.acceptance.references.baseline import BASELINE_TAG
from hpcnet.acceptance.references.references import (PROVENANCE, ReferenceFileError, load,
                                                     reference_dir, reference_file)

#: A session UUID as ReFrame writes it.
SESSION_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
#: What makes a baseline, for every message that finds none.
HOW_TO_MAKE = 'make one with `hpcnet baseline --write`'


class NoAcceptedBaseline(ValueError):
    """The reference file names no sessions, or names ones that cannot be
    used: a usage error (exit 2)."""


def provenance_sessions(path: Path) -> list:
    """The session UUIDs of each provenance block of the reference file at
    ``path``, newest block first; blocks that name no sessions (written by
    hand) are left out.  A name that is not a UUID (references generated
    from a report file without one) is an error naming it."""
    try:
        prov = load(path, None).get(PROVENANCE)
    except ReferenceFileError as err:
        raise NoAcceptedBaseline(str(err)) from None
    if not isinstance(prov, dict):
        return []
    blocks = []
    for number, block in enumerate([prov, *(prov.get('earlier') or [])]):
        key = f'{PROVENANCE}: ' + (f'earlier[{number - 1}]: ' if number else '') + 'sessions'
        sessions = block.get('sessions') if isinstance(block, dict) else None
        if not sessions:
            continue
        if not isinstance(sessions, list):
            raise NoAcceptedBaseline(f'{path}: {key}: expected a list of session UUIDs')
        for name in sessions:
            if not SESSION_UUID.fullmatch(str(name)):
                raise NoAcceptedBaseline(f'{path}: {key}: {name!r} is not a stored session UUID '
                                         f'(valid: the UUIDs of ReFrame sessions); {HOW_TO_MAKE}')
        blocks.append([str(name) for name in sessions])
    return blocks


def reference_file_of(system: str | None) -> Path:
    """The reference file whose provenance is the baseline of ``system``;
    without a system, the only file of the reference directory that names
    sessions."""
    refdir = reference_dir()
    if system:
        return reference_file(system, refdir)
    named = [p for p in sorted(refdir.glob('*.yaml')) if provenance_sessions(p)]
    if len(named) == 1:
        return named[0]
    if not named:
        raise NoAcceptedBaseline(f'baseline: no reference file in {refdir} names the sessions it '
                                 f'was made from; {HOW_TO_MAKE}')
    raise NoAcceptedBaseline(f'baseline: {", ".join(p.stem for p in named)} in {refdir} each have '
                             'a baseline; say which with --baseline-system NAME')


def baseline_sessions(system: str | None) -> tuple:
    """(reference file, its sessions per provenance block, newest first) of
    the baseline of ``system``; an error naming the file when it has none."""
    path = reference_file_of(system)
    if not path.is_file():
        raise NoAcceptedBaseline(f'baseline: {path} does not exist, so no baseline was accepted '
                                 f'for system {system!r}; {HOW_TO_MAKE}')
    blocks = provenance_sessions(path)
    if not blocks:
        raise NoAcceptedBaseline(f'baseline: {path} names no sessions in its {PROVENANCE} '
                                 f'(written by hand, or before baselines recorded them); '
                                 f'{HOW_TO_MAKE}')
    return path, blocks


def candidate_note(baseline_id: str, reference: Path | None) -> str:
    """What a baseline not written into the reference file runs read is: a
    candidate, what ``baseline`` still names, and how to compare with it."""
    where = f'the sessions in the provenance of {reference}' if reference else \
        "the sessions in the provenance of each system's reference file"
    return (f'candidate {baseline_id}, not the baseline: `baseline` (compare, accept, the nightly '
            f"templates) still names {where}; compare with the candidate: hpcnet compare baseline "
            f"'?{BASELINE_TAG}==\"{baseline_id}\"' --include-baselines")
