"""What loading config/settings.py does: ReFrame's systems and environments
of hpcnet, and the checks that stop a session before ReFrame starts it.

:func:`configuration` is the one call config/settings.py makes.  It creates
the reports directory, runs every site file (config/systems/,
HPCNET_SYSTEMS_DIRS), discovers the MPI stacks (hpcnet.stacks; a cache that
still holds makes that a file read) and, where environments load modules,
sets LMOD_CMD in this process.  For a session that runs or lists checks it
reads ReFrame's command line, and stops it (one line, exit 2) where the host
matches no site file, a system whose ranks share a host lacks
--exec-policy=serial, a reference file is broken, or -p matches no environment.
"""
from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass

from hpcnet import stacks
from hpcnet.acceptance.references import references
from hpcnet.constants import DEFAULT_REPORTS_DIR, REFRAME_PREFIX
from hpcnet.exitcodes import Exit
from hpcnet.model import ConfigError
from hpcnet.siteconfig.reframeargs import is_option, named_system, option_values, unmatched_prgenv
from hpcnet.siteconfig.sites import (load_site_files, selected_site, shares_host_cores,
                                     system_directories, unmatched_host)
from hpcnet.stacks import modules

#: ReFrame's options of a session that selects checks: the host must match a
#: site file (or --system name one), and -p an environment.
SELECTING_OPTIONS = ('-r', '--run', '--dry-run', '-l', '-L', '--list', '--list-detailed',
                     '--describe', '--ci-generate')
#: ReFrame's options of a listing: it keeps its own debug log, so that the
#: last run's survives it.
LISTING_OPTIONS = ('-l', '-L', '--list', '--list-detailed', '--describe', '--list-tags')
RUN_OPTIONS = ('-r', '--run')
RUN_LOG = 'reframe.log'
LISTING_LOG = 'reframe-listing.log'


@dataclass(frozen=True)
class ReFrameSites:
    """The parts of ReFrame's configuration hpcnet makes."""
    systems: list                 #: ReFrame's ``systems`` section
    environments: list            #: ReFrame's ``environments`` section
    #: ReFrame ``general`` entries of the systems whose site file sets its
    #: own (hpcnet.siteconfig.sites.GENERAL), each with its ``target_systems``.
    system_general: list
    #: The debug log's file name in the reports directory.
    log_file: str


class SessionStop(Exception):
    """What stops a ReFrame session before it starts: one line for the user."""


def configuration(argv: list | None = None, environ=None,
                  hostname: str | None = None) -> ReFrameSites:
    """hpcnet's part of ReFrame's configuration for the session ``argv``
    (default: this process's command line, which is ReFrame's); a session
    that cannot judge ends here: one line on stderr, exit code 2."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    hostname = socket.gethostname() if hostname is None else hostname
    try:
        return _configuration(argv, environ, hostname)
    except (SessionStop, ConfigError) as err:
        print(f'hpcnet: error: {err}', file=sys.stderr)
        raise SystemExit(Exit.USAGE) from None


def _configuration(argv: list, environ, hostname: str) -> ReFrameSites:
    # The debug log and the reports are written here; ReFrame does not create it.
    os.makedirs(DEFAULT_REPORTS_DIR, exist_ok=True)
    sites = load_site_files(*system_directories())
    systems = [site.system for site in sites]
    selecting = any(is_option(a, SELECTING_OPTIONS) for a in argv)
    named = named_system(argv, environ)
    # A host that no site file names does not fall back to `local` (nor to
    # ReFrame's `generic`) where site files exist, unless --system names one.
    unmatched = unmatched_host(systems, hostname)
    if unmatched and not named and selecting:
        raise SessionStop(unmatched)
    # What decides verdicts is checked here, so that `reframe -C
    # config/settings.py -c checks -r` judges as `hpcnet run` does (docs/developing.md,
    # "hpcnet run and reframe -r").
    if any(a in RUN_OPTIONS for a in argv):
        _check_run(selected_site(sites, named, hostname), argv)
    for site in sites:
        # Stage and output under the work directory, not wherever ReFrame was
        # started (`hpcnet run` gives each session its own --prefix).
        site.system.setdefault('prefix', str(REFRAME_PREFIX))
        for partition in site.system['partitions']:
            # Timed jobs of one partition never overlap: its links are under test.
            partition.setdefault('max_jobs', 1)
    # Each system gets the environments its site file's `stacks` admits.
    environments = stacks.site_environments(_discovery(selected_site(sites, named, hostname)), sites)
    if selecting:
        # A -p that matches no environment would select nothing, and ReFrame pass.
        unmatched_environment = unmatched_prgenv(argv, [e['name'] for e in environments])
        if unmatched_environment:
            raise SessionStop(unmatched_environment)
    # Environments that load modules need ReFrame's Lmod backend (hpcnet.stacks.modules).
    modules.configure_reframe(systems, environments)
    return ReFrameSites(systems, environments,
                        [{**site.general, 'target_systems': [site.system['name']]}
                         for site in sites if site.general],
                        _log_file(argv))


def _check_run(chosen, argv: list) -> None:
    """Stop a run that could not judge: ranks sharing a host's cores without
    the serial policy, or a broken reference file."""
    # Where the ranks share one host's cores, jobs of other partitions and
    # builds disturb them, and only the serial policy keeps those apart:
    # ReFrame 4.10 has no configuration key for it.
    if (chosen and shares_host_cores(chosen.system)
            and (option_values(argv, '--exec-policy') or ['async'])[-1] != 'serial'):
        raise SessionStop(f"system {chosen.system['name']} ({chosen.path}): its ranks share the "
                          'cores of one host, so timed runs must run one at a time: add '
                          '--exec-policy=serial (ReFrame cannot set it in a configuration; '
                          '`hpcnet run` adds it)')
    # A broken reference file stops the session before anything runs (else
    # every case of its system fails on it, one by one).
    if references.reference_dir().is_dir():
        try:
            references.validate_directory()
        except references.ReferenceFileError as err:
            raise SessionStop(str(err)) from None


def _discovery(site) -> stacks.Discovery:
    # Each MPI is probed on every fabric one host can carry, whatever the
    # systems declare: an environment's fabric gaps are its own; the
    # session's site may name where its stacks are (hpcnet.stackvalues).
    try:
        return stacks.discover(site=site)
    except stacks.StackError as err:
        # The configuration still loads, so that `reframe --list` etc. show
        # the problem instead of a traceback.
        print(f'hpcnet: {err}', file=sys.stderr)
        return stacks.Discovery()


def _log_file(argv: list) -> str:
    listing = (any(is_option(a, LISTING_OPTIONS) for a in argv)
               and not any(a in (*RUN_OPTIONS, '--dry-run') for a in argv))
    return LISTING_LOG if listing else RUN_LOG

