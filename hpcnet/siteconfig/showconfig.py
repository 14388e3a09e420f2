"""What `hpcnet config` shows: every setting in force and where it came
from, as EasyBuild's `eb --show-config` prints its own.

Each line is ``name = value  [source]``; a source is ``default``,
``environment variable NAME``, ``site file PATH`` or ``command line``.
Nothing is probed: the environments are those the last discovery cached.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpcnet import stacks, stackvalues
from hpcnet.siteconfig import sites
from hpcnet.constants import (DEFAULT_REPORTS_DIR, PERFLOG_DIR, REFERENCE_DIR, REFRAME_PREFIX,
                              SYSTEMS_DIR)
from hpcnet.paths import DATA_DIR, PROJECT_ROOT, WORK_DIR
from hpcnet.model import PartitionKey
from hpcnet.siteconfig.reframeargs import RFM_SYSTEM_ENV
from hpcnet.stacks.modulecache import CACHE_FILE as MODULES_CACHE_FILE
from hpcnet.variables import (HOME_ENV, REFERENCE_DIR_ENV, REPORTS_DIR_ENV, STATE_DIR_ENV,
                              SYSTEMS_DIRS_ENV, VARIABLES, WORK_DIR_ENV)

DEFAULT = 'default'
COMMAND_LINE = 'command line'
#: ReFrame's own variables that move what the configuration sets.
RFM_RESULTS_DB_ENV = 'RFM_SQLITE_DB_FILE'
RFM_PERFLOG_DIR_ENV = 'RFM_PERFLOG_DIR'
RFM_PREFIX_ENV = 'RFM_PREFIX'


def env_source(name: str) -> str:
    return f'environment variable {name}'


def site_source(path) -> str:
    return f'site file {path}'


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    source: str


def _from_env(name: str, env_var: str, default, environ) -> Setting:
    '''A directory or file that ``env_var`` moves from ``default``.'''
    if environ.get(env_var):
        return Setting(name, environ[env_var], env_source(env_var))
    return Setting(name, str(default), DEFAULT)


def _systems_dirs(environ) -> list:
    dirs = [Setting('systems dir', str(SYSTEMS_DIR), DEFAULT)]
    dirs += [Setting('systems dir', d, env_source(SYSTEMS_DIRS_ENV))
             for d in environ.get(SYSTEMS_DIRS_ENV, '').split(':') if d]
    return dirs


def system_settings(system_option: str | None, hostname: str, environ) -> tuple:
    '''(settings, the chosen SiteFile or None, why none was chosen or None).'''
    loaded = sites.load_site_files(*sites.system_directories())
    by_name = {s.system['name']: s for s in loaded}
    out = [Setting('hostname', hostname, 'socket.gethostname(), as ReFrame reads it')]
    named, source, given = system_option, COMMAND_LINE + ' (--system)', f'--system {system_option}'
    if not named and environ.get(RFM_SYSTEM_ENV):
        named, source = environ[RFM_SYSTEM_ENV], env_source(RFM_SYSTEM_ENV)
        given = f'{RFM_SYSTEM_ENV}={named}'
    if named:
        name = named.split(':')[0]
        if name not in by_name:
            return out, None, (f'{given}: no such system (valid: '
                               f'{", ".join(sorted(by_name))})')
        site = by_name[name]
    else:
        unmatched = sites.unmatched_host([s.system for s in loaded], hostname)
        match = None if unmatched else sites.matching_system(loaded, hostname)
        if match is None:
            return out, None, unmatched or f'host {hostname!r} matches no site file'
        site, pattern = match
        source = f'hostname matches {pattern!r} of {site_source(site.path)}'
    out.append(Setting('system', site.system['name'], source))
    out.append(Setting('site file', site.path, 'in ' + (env_source(SYSTEMS_DIRS_ENV)
                                                       if Path(site.path).parent != SYSTEMS_DIR
                                                       else f'{SYSTEMS_DIR} ({DEFAULT})')))
    where = site_source(site.path)
    for part in site.system['partitions']:
        extras = part.get('extras', {})
        fields = [f'fabric {extras.get(PartitionKey.FABRIC)}',
                  f'scheduler {part.get("scheduler")}', f'launcher {part.get("launcher")}']
        if extras.get(PartitionKey.PMI):
            fields.append(f'pmi {extras[PartitionKey.PMI]}')
        if part.get('access'):
            fields.append(f'access {" ".join(part["access"])}')
        fields.append(f'max_jobs {part.get("max_jobs", "1 (config/settings.py)")}')
        out.append(Setting(f'partition {part["name"]}', ', '.join(fields), where))
    choice = site.stacks
    if choice.include or choice.exclude or not choice.pypi_stacks:
        rules = [f'include {[p.pattern for p in choice.include]}',
                 f'exclude {[p.pattern for p in choice.exclude]}',
                 f'pypi_stacks {choice.pypi_stacks}']
        out.append(Setting('stacks', ', '.join(rules), where))
    else:
        out.append(Setting('stacks', 'every environment found', DEFAULT))
    policy = ('serial only: its ranks share the cores of one host'
              if sites.shares_host_cores(site.system) else
              'serial under hpcnet run; one job per partition at a time under either policy')
    out.append(Setting('execution policy', policy, 'config/settings.py'))
    return out, site, None


def stage_settings(site, environ) -> list:
    '''Where ReFrame stages and keeps the output of a session.'''
    system = site.system if site else {}
    where = site_source(site.path) if site else None
    out = []
    for key in ('stagedir', 'outputdir'):
        if system.get(key):
            out.append(Setting(key, system[key], where))
    if environ.get(RFM_PREFIX_ENV):
        plain = Setting('prefix (reframe -r)', environ[RFM_PREFIX_ENV],
                        env_source(RFM_PREFIX_ENV))
    elif system.get('prefix'):
        plain = Setting('prefix (reframe -r)', system['prefix'], where)
    else:
        plain = Setting('prefix (reframe -r)', str(REFRAME_PREFIX), 'config/settings.py')
    base = sites.sessions_dir(site)
    run = Setting('prefix (hpcnet run)', str(base / '<report name>'),
                  f'hpcnet run --prefix under {where if system.get("prefix") else DEFAULT} '
                  '(default report name: run)')
    return [*out, run, plain]


def path_settings(site, environ) -> list:
    out = [Setting('data dir', str(DATA_DIR),
                   'the checkout' if PROJECT_ROOT else env_source(HOME_ENV)),
           Setting('work dir', str(WORK_DIR),
                   env_source(WORK_DIR_ENV) if environ.get(WORK_DIR_ENV)
                   else 'the checkout' if PROJECT_ROOT else 'the current directory'),
           *_systems_dirs(environ)]
    state = _from_env('state dir', STATE_DIR_ENV, stacks.state_dir(), environ)
    out.append(state)
    for name, file in (('stacks cache', stacks.CACHE_FILE),
                       ('modules cache', MODULES_CACHE_FILE)):
        path = Path(state.value) / file
        out.append(Setting(name, f'{path}{"" if path.exists() else " (none yet)"}',
                           state.source))
    refs = _from_env('reference dir', REFERENCE_DIR_ENV, REFERENCE_DIR, environ)
    reports = _from_env('reports dir', REPORTS_DIR_ENV, DEFAULT_REPORTS_DIR, environ)
    out.append(refs)
    if site is not None:
        path = Path(refs.value) / f'{site.system["name"]}.yaml'
        missing = '' if path.exists() else ' (none: runs record values and judge none)'
        out.append(Setting('reference file', f'{path}{missing}', refs.source))
    out += [reports,
            _from_env('results database', RFM_RESULTS_DB_ENV,
                      DEFAULT_REPORTS_DIR / 'results.db', environ),
            _from_env('perflogs', RFM_PERFLOG_DIR_ENV, PERFLOG_DIR, environ)]
    return out


def environment_settings(site) -> list:
    found = stacks.cached_discovery()
    if found is None:
        return [Setting('environments', 'none cached yet: `hpcnet stacks` finds them', DEFAULT)]
    envs = found.environments
    source = f'{stacks.state_dir() / stacks.CACHE_FILE} (`hpcnet stacks --refresh` probes again)'
    if site is not None:
        envs = stacks.chosen_environments(found, site.stacks)
        source += f', admitted by {site_source(site.path)}'
    return [Setting('environments', ', '.join(e.name for e in envs) or 'none', source)]


def variable_settings(site, environ) -> list:
    '''Each variable's value; a stack variable the site file also sets says
    which of the two is in force (the environment's wins).'''
    values = site.stack_values if site else ()
    out = []
    for v in VARIABLES:
        given = stackvalues.in_force(v.name, values, environ)
        if given:
            out.append(Setting(v.name, *given))
        elif environ.get(v.name):
            out.append(Setting(v.name, environ[v.name], 'environment'))
        else:
            out.append(Setting(v.name, f'unset: {v.unset}', DEFAULT))
    return out


def render(groups: list) -> str:
    width = max(len(s.name) for title, settings in groups for s in settings)
    lines = ['#', '# hpcnet configuration in force: name = value  [where it came from]', '#']
    for title, settings in groups:
        lines.append(f'# {title}')
        lines += [f'{s.name:{width}} = {s.value}  [{s.source}]' for s in settings]
    return '\n'.join(lines)


def setting_groups(system_option: str | None, hostname: str, environ) -> tuple:
    '''([(title, [Setting])], why no system was chosen or None).'''
    system, site, problem = system_settings(system_option, hostname, environ)
    rfm = [Setting(k, v, 'environment') for k, v in sorted(environ.items()) if k.startswith('RFM_')]
    groups = [('system', system), ('directories and files', path_settings(site, environ)),
              ('stage and output', stage_settings(site, environ)),
              ('environments', environment_settings(site)),
              ('HPCNET_* variables (docs/site-guide.md)', variable_settings(site, environ))]
    if rfm:
        groups.append(("ReFrame's variables", rfm))
    return groups, problem
