"""Site files: each ``config/systems/<name>.py`` (and each file of the
directories in HPCNET_SYSTEMS_DIRS) defines ``system``, one ReFrame system
whose partitions hpcnet.model validates, and may define ``stacks``, which of
the environments found that system gets (hpcnet.model.StackChoice),
``fabrics``, the site's own fabrics (registry entries, hpcnet.fabrics), and
``general``, ReFrame settings of its system alone.  A mistake is one
ConfigError naming the file and the key.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from hpcnet import fabrics, stackvalues
from hpcnet.constants import OUTPUT_DIR, SYSTEMS_DIR, TOLERANCE_CAP, TOLERANCE_FLOOR
from hpcnet.variables import SYSTEMS_DIRS_ENV
from hpcnet.model import ConfigError, PartitionKey, StackChoice, check_system


#: A site file's optional number: the tightest tolerance `hpcnet baseline`
#: gives its system's references (fraction of the median; default
#: TOLERANCE_FLOOR).  Where a clean run moves by more than the sessions of a
#: baseline show (nodes sharing a host's cores), the site widens it here
#: rather than every baseline command taking --floor.
BASELINE_FLOOR = 'baseline_floor'


#: A site file's optional list of sections `hpcnet report` adds to a page of
#: its system's sessions, each (heading, anchor, function of one session's
#: report that returns the section's text, '' where it has nothing to show):
#: a system's own pages live in its site file, not in the report.
REPORT_SECTIONS = 'report_sections'


#: A site file's optional list of its own fabrics (hpcnet.fabrics.FabricEntry),
#: registered before its partitions are validated; their MPI settings are
#: blocks of the fabric table HPCNET_FABRICS_FILE names.
SITE_FABRICS = 'fabrics'


#: A site file's optional mapping of ReFrame ``general`` settings for its
#: system alone: what its scheduler needs (how often ReFrame polls it).
GENERAL = 'general'


def _register_fabrics(value, where: str) -> None:
    """Register a site file's own fabrics (its ``fabrics``, from ``where``).
    The same entry again is no change: a process may load its site files twice."""
    if value is None:
        return
    if not isinstance(value, (list, tuple)) \
            or not all(isinstance(e, fabrics.FabricEntry) for e in value):
        raise ConfigError(f'{where}: {SITE_FABRICS} is {value!r} (valid: a list of '
                          'hpcnet.fabrics.FabricEntry)')
    for entry in value:
        if entry.name in fabrics.fabric_names() and fabrics.fabric(entry.name) == entry:
            continue
        try:
            fabrics.register(entry)
        except fabrics.RegistryError as err:
            raise ConfigError(f'{where}: {SITE_FABRICS}: {err}') from None


@dataclass(frozen=True)
class SiteFile:
    """A system file: its ReFrame system, the site's choice of environments,
    its baseline's tolerance floor (BASELINE_FLOOR), its report's own
    sections (REPORT_SECTIONS), its own ReFrame settings (GENERAL) and the
    stack variables it sets (hpcnet.stackvalues)."""
    path: str
    system: dict
    stacks: StackChoice
    baseline_floor: float = TOLERANCE_FLOOR
    report_sections: tuple = ()
    #: ReFrame ``general`` settings of this system alone (GENERAL).
    general: dict = field(default_factory=dict)
    stack_values: tuple = ()


def _baseline_floor(value, where: str) -> float:
    """Validate a site file's ``baseline_floor`` (from ``where``)."""
    if value is None:
        return TOLERANCE_FLOOR
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0 < value < TOLERANCE_CAP:
        raise ConfigError(f'{where}: {BASELINE_FLOOR} is {value!r} (valid: a fraction above 0 '
                          f'and below the tolerance cap {TOLERANCE_CAP:g}, e.g. 0.1 for 10 %; '
                          f'default {TOLERANCE_FLOOR:g})')
    return float(value)


def _report_sections(value, where: str) -> tuple:
    """Validate a site file's ``report_sections`` (from ``where``)."""
    if value is None:
        return ()
    if isinstance(value, (list, tuple)) and all(
            isinstance(s, (list, tuple)) and len(s) == 3 and isinstance(s[0], str)
            and isinstance(s[1], str) and callable(s[2]) for s in value):
        return tuple(tuple(s) for s in value)
    raise ConfigError(f'{where}: {REPORT_SECTIONS} is {value!r} (valid: a list of (heading, '
                      "anchor, function of one session's report returning the section's text))")


def reframe_general_keys() -> tuple:
    """The keys of ReFrame's ``general`` section (its configuration schema),
    but ``target_systems``: what a site file's GENERAL may set."""
    import reframe
    schema = Path(reframe.INSTALL_PREFIX) / 'reframe' / 'schemas' / 'config.json'
    properties = json.loads(schema.read_text())['properties']['general']['items']['properties']
    return tuple(sorted(set(properties) - {'target_systems'}))


def _general(value, where: str) -> dict:
    """Validate a site file's ``general`` (from ``where``)."""
    if value is None:
        return {}
    valid = reframe_general_keys()
    if not isinstance(value, dict):
        raise ConfigError(f'{where}: {GENERAL} is {value!r} (valid: a mapping of ReFrame '
                          f'general settings: {", ".join(valid)})')
    unknown = sorted((k for k in value if k not in valid), key=str)
    if unknown:
        raise ConfigError(f'{where}: {GENERAL}.{unknown[0]} is not a ReFrame general setting '
                          f'of one system (valid: {", ".join(valid)})')
    return dict(value)


def _run_site_file(path: Path):
    """The module of one site file, run; what stops it (a syntax error, a
    misspelled argument, a failed import) is one ConfigError naming the file
    and the line."""
    spec = importlib.util.spec_from_file_location(f'hpcnet_system_{path.stem}', path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ConfigError as err:
        raise ConfigError(f'{path}:{_site_line(err, path)}: {err}') from err
    except SyntaxError as err:
        raise ConfigError(f'{path}:{err.lineno}: {err.msg}') from err
    except Exception as err:    # whatever the site's own Python raised
        raise ConfigError(f'{path}:{_site_line(err, path)}: {type(err).__name__}: {err}') from err
    return module


def _site_line(err: BaseException, path: Path) -> str:
    """The line of the site file where ``err`` was raised (or passed through)."""
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__)
             if frame.filename == str(path)]
    return str(lines[-1]) if lines else '?'


def _check_backends(part: dict, where: str) -> None:
    """The partition's scheduler and launcher are ReFrame's (a misspelled one
    would stop ReFrame only when the partition runs)."""
    from reframe.core import backends
    from reframe.core.exceptions import ConfigError as ReFrameConfigError
    for key, lookup in (('scheduler', backends.getscheduler), ('launcher', backends.getlauncher)):
        try:
            lookup(part.get(key))
        except ReFrameConfigError as err:
            raise ConfigError(f'{where}: {key}: {err} (valid: a scheduler or launcher of '
                              "ReFrame's configuration reference, e.g. slurm and srun)") from err


def _check_reframe_keys(system, path: Path) -> None:
    """What ReFrame would refuse only later, or take in another sense: the
    system's ``hostnames`` (a list of regular expressions; a string would be
    read as its letters, and '^' matches every host) and each partition's
    scheduler and launcher."""
    name, hostnames = system.get('name'), system.get('hostnames')
    if (not isinstance(hostnames, list) or not hostnames
            or not all(isinstance(h, str) for h in hostnames)):
        given = f'is {hostnames!r}' if 'hostnames' in system else 'is missing'
        raise ConfigError(f'{path}: system {name}: `hostnames` {given} (valid: a list of regular '
                          "expressions of the login hosts' names, e.g. ['^login'])")
    for pattern in hostnames:
        try:
            re.compile(pattern)
        except re.error as err:
            raise ConfigError(f'{path}: system {name}: hostnames: {pattern!r} is not a regular '
                              f'expression ({err})') from err
    for part in system['partitions']:
        _check_backends(part, f'{path}: partition {name}:{part.get("name")}')


def load_site_files(*directories) -> list:
    """Every ``<directory>/<name>.py`` defines ``system``, one ReFrame system
    (a site is a file), and may define ``stacks`` (StackChoice),
    ``fabrics`` (its own fabrics, registered here), BASELINE_FLOOR,
    REPORT_SECTIONS and GENERAL.  Returned
    validated (SiteFile), in the order ReFrame must try them: by file name,
    except that systems whose hostnames match any host (``.*``, the ``local``
    fallback) come last."""
    sites = []
    for path in sorted(p for d in directories for p in Path(d).glob('*.py')):
        module = _run_site_file(path)
        if not hasattr(module, 'system'):
            raise ConfigError(f'{path}: defines no `system` (a ReFrame system dictionary)')
        _register_fabrics(getattr(module, SITE_FABRICS, None), str(path))
        system = check_system(module.system, str(path))
        _check_reframe_keys(system, path)
        sites.append(SiteFile(str(path), system,
                              StackChoice.from_site(getattr(module, 'stacks', None), str(path)),
                              _baseline_floor(getattr(module, BASELINE_FLOOR, None), str(path)),
                              _report_sections(getattr(module, REPORT_SECTIONS, None), str(path)),
                              _general(getattr(module, GENERAL, None), str(path)),
                              stackvalues.from_site(getattr(module, 'stacks', None), str(path))))
    names = [s.system['name'] for s in sites]
    for name in set(names):
        if names.count(name) > 1:
            raise ConfigError(f'system {name!r} is defined by more than one system file')
    return sorted(sites, key=lambda s: '.*' in s.system.get('hostnames', []))


def load_system_files(*directories) -> list:
    """The ReFrame systems of load_site_files."""
    return [site.system for site in load_site_files(*directories)]


#: The system files the suite ships: the fallback, the testbed, the template.
SHIPPED_SYSTEMS = ('local', 'testbed', 'example')


def unmatched_host(systems: list, hostname: str) -> str | None:
    """Why ``hostname`` may not fall back to ``local``: site files exist and
    none of their ``hostnames`` matches it (ReFrame matches from the start
    of the name). A site's login node running as ``local`` would judge the
    login node, not the cluster. None where a site matches, or none exists."""
    sites = [s for s in systems if s['name'] not in SHIPPED_SYSTEMS]
    if not sites:
        return None
    specific = [s for s in systems if '.*' not in s.get('hostnames', [])]
    if any(re.match(pattern, hostname) for s in specific for pattern in s['hostnames']):
        return None
    named = '; '.join(f"{s['name']} (hostnames {s['hostnames']})" for s in sites)
    return (f'host {hostname!r} matches no site file: {named}. Add this host to its site\'s '
            "'hostnames', or choose a system with --system (--system local runs on this host alone)")


def matching_system(sites: list, hostname: str):
    """(site, pattern): the first of ``sites`` (SiteFile, in ReFrame's order)
    whose ``hostnames`` match ``hostname`` from its start, as ReFrame picks
    a system without --system; None when none does."""
    for site in sites:
        for pattern in site.system.get('hostnames', []):
            if re.match(pattern, hostname):
                return site, pattern
    return None


def selected_site(sites: list, named: str, hostname: str):
    """The SiteFile a session runs on: the system ``named`` (a --system
    value, ``name`` or ``name:partition``) or, without one, the first whose
    ``hostnames`` match ``hostname``; None when there is none such."""
    if named:
        return next((s for s in sites if s.system['name'] == named.split(':')[0]), None)
    match = matching_system(sites, hostname)
    return match[0] if match else None


def session_site(named: str | None):
    """The SiteFile a session on this host runs on (selected_site of every
    site file), None where there is none."""
    return selected_site(load_site_files(*system_directories()), named, socket.gethostname())


def baseline_floor(system_name: str | None, given: float | None = None) -> tuple:
    """(floor, where it comes from): the tightest tolerance a baseline of
    system ``system_name`` gets: ``given`` (--floor), else its site file's
    BASELINE_FLOOR, else TOLERANCE_FLOOR."""
    if given is not None:
        return given, '--floor'
    site = next((s for s in load_site_files(*system_directories())
                 if s.system['name'] == system_name), None)
    if site is None or site.baseline_floor == TOLERANCE_FLOOR:
        return TOLERANCE_FLOOR, 'the default'
    return site.baseline_floor, f'{site.path}: {BASELINE_FLOOR}'


def sessions_dir(site) -> Path:
    """Where `hpcnet run` gives each session its ReFrame prefix (stage and
    output): the ``prefix`` the site file sets (a filesystem the compute
    nodes see), else the work directory's output/."""
    return Path(site.system['prefix']) if site and site.system.get('prefix') else OUTPUT_DIR


def system_directories() -> list:
    """config/systems, and the directories in HPCNET_SYSTEMS_DIRS
    (colon-separated: a site's own system files kept outside the checkout)."""
    extra = [d for d in os.environ.get(SYSTEMS_DIRS_ENV, '').split(':') if d]
    return [SYSTEMS_DIR, *extra]


def missing_system_directories() -> str | None:
    """What HPCNET_SYSTEMS_DIRS names that is not a directory (a typo, or
    the directory `hpcnet site init` is about to make), said in one clause;
    None where there is none."""
    missing = [d for d in system_directories() if not os.path.isdir(d)]
    return (f'{SYSTEMS_DIRS_ENV} names {", ".join(repr(d) for d in missing)}, not a directory '
            '(valid: directories of site files, separated by colons)') if missing else None


def shares_host_cores(system: dict) -> bool:
    """Whether the ranks of ``system`` share the cores of one host: its jobs
    run where ReFrame runs (scheduler ``local``) or on nodes that share a
    host (extras ``nodes_share_cores``, the testbed).  There, timed jobs of
    different partitions, and a build beside a run, disturb each other."""
    return any(p.get('scheduler') == 'local' or p['extras'].get(PartitionKey.NODES_SHARE_CORES)
               for p in system['partitions'])
