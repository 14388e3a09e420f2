"""The environments each partition is offered, as ReFrame's ``environments``
section and each partition's ``environs``: every discovered environment a
site's ``stacks`` admits, less those whose MPI cannot use the partition's
fabric on this host (named, :func:`left_out`), plus :data:`BUILTIN_ENV`.
"""
from __future__ import annotations

from dataclasses import dataclass

from hpcnet.constants import BUILTIN_ENV
from hpcnet.model import PartitionKey, StackChoice
from hpcnet.stacks.discover import Discovery, Environment




def chosen_environments(found: Discovery, choice: StackChoice) -> list:
    """The discovered environments a site's choice (its file's ``stacks``) admits."""
    return [e for e in found.environments
            if choice.refusal(e.name, e.mpi.candidate.source) is None]


@dataclass(frozen=True)
class LeftOut:
    '''An environment not offered on a partition: its MPI cannot use the
    partition's fabric on this host (what is missing, what provides it).'''
    partition: str       #: system:partition
    environment: str
    missing: str


def _fabric_gap_here(env: Environment, partition: dict) -> str | None:
    '''What ``env`` lacks for the fabric ``partition`` declares, where the
    partition's ranks run on this host; None where it can use it.  A compute
    node's gaps are not this host's: its own job finds them (and fails).'''
    if partition.get('scheduler') != 'local':
        return None
    return dict(env.mpi.fabric_gaps).get(partition.get('extras', {}).get(PartitionKey.FABRIC))


def _partitions_offered(found: Discovery, site):
    '''(partition, [environments offered], [LeftOut]) of each of a site's
    partitions that lists no ``environs`` of its own (a list the site wrote
    is kept: a gap there is a skip that the verdict counts).'''
    chosen = chosen_environments(found, site.stacks)
    for partition in site.system['partitions']:
        if 'environs' in partition:
            continue
        gaps = [(e, _fabric_gap_here(e, partition)) for e in chosen]
        yield (partition, [e for e, gap in gaps if gap is None],
               [LeftOut(f"{site.system['name']}:{partition['name']}", e.name, gap)
                for e, gap in gaps if gap])


def left_out(found: Discovery, sites: list) -> list:
    '''The environments a site's partitions are not offered (LeftOut),
    because their MPI cannot use the partition's fabric on this host.'''
    return [gone for site in sites for *_, gaps in _partitions_offered(found, site)
            for gone in gaps]


def site_environments(found: Discovery, sites: list) -> list:
    """The ReFrame ``environments`` section for ``sites`` (hpcnet.siteconfig.sites.SiteFile);
    each partition of theirs that lists no ``environs`` gets every environment
    its site's choice admits that can use its fabric (:func:`left_out` names
    the others), and :data:`BUILTIN_ENV`."""
    for site in sites:
        for partition, offered, _ in list(_partitions_offered(found, site)):
            partition['environs'] = [e.name for e in offered] + [BUILTIN_ENV]
    return reframe_environments(found, {site.system['name']: site.stacks for site in sites})


def reframe_environments(found: Discovery, choices: dict) -> list:
    """The ReFrame ``environments`` section: every discovered environment on
    the systems whose choice admits it (``choices``: {system name:
    StackChoice}), plus :data:`BUILTIN_ENV` on every system."""
    admitted = {name: {e.name for e in chosen_environments(found, choice)}
                for name, choice in choices.items()}
    envs = []
    for env in found.environments:
        systems = [name for name in choices if env.name in admitted[name]]
        if systems:
            envs.append(env.to_reframe(systems))
    envs.append({'name': BUILTIN_ENV, 'cc': 'cc', 'cxx': '', 'ftn': '',
                 'target_systems': list(choices)})
    return envs
