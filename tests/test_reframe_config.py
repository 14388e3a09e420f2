"""config/settings.py is ReFrame's plain dictionary and one call into hpcnet
(hpcnet.siteconfig.reframeconfig.configuration): short, and without an exit path of its
own; what stops a session, and what one system needs of ReFrame (a site
file's `general`), is hpcnet's."""
import ast

import pytest

from hpcnet.siteconfig import reframeconfig, sites
from hpcnet.constants import CONFIG_DIR
from hpcnet.model import ConfigError

SETTINGS = CONFIG_DIR / 'settings.py'
#: config/settings.py reads as a dictionary, not a program.
MAX_SETTINGS_LINES = 80


def _exit_paths(source: str) -> list:
    '''The calls and raises of ``source`` that end the process.'''
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in ('sys.exit', 'exit', 'quit', 'os._exit') or name.endswith('_stop'):
                found.append(name)
        elif isinstance(node, ast.Raise) and node.exc is not None \
                and 'SystemExit' in ast.unparse(node.exc):
            found.append('raise SystemExit')
    return found


def test_exit_paths_are_found():
    assert _exit_paths('import sys\nif x:\n    sys.exit(2)\n') == ['sys.exit']
    assert _exit_paths('exit(1)\n') == ['exit']
    assert _exit_paths('raise SystemExit(2)\n') == ['raise SystemExit']
    assert _exit_paths('_stop("no")\n') == ['_stop']
    assert _exit_paths('x = {"a": 1}\n') == []


def test_settings_is_short_and_has_no_exit_path():
    source = SETTINGS.read_text()
    assert len(source.splitlines()) < MAX_SETTINGS_LINES
    assert _exit_paths(source) == []
    calls = {ast.unparse(n.func) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)}
    assert {c for c in calls if 'hpcnet' in c or 'reframeconfig' in c} \
        == {'reframeconfig.configuration'}


def test_a_run_where_ranks_share_a_host_without_the_serial_policy_stops(capsys):
    with pytest.raises(SystemExit) as stop:
        reframeconfig.configuration(['reframe', '-r', '--system', 'local'], {}, 'anyhost')
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith('hpcnet: error: system local (') and err.count('\n') == 1, err
    assert 'add --exec-policy=serial' in err


def test_a_host_matching_no_site_file_stops_a_listing(tmp_path, monkeypatch, capsys):
    (tmp_path / 'mysite.py').write_text(
        "system = {'name': 'mysite', 'hostnames': ['^mysite-login'], 'partitions': []}\n")
    monkeypatch.setenv('HPCNET_SYSTEMS_DIRS', str(tmp_path))
    with pytest.raises(SystemExit) as stop:
        reframeconfig.configuration(['reframe', '-l'], {}, 'elsewhere')
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("hpcnet: error: host 'elsewhere' matches no site file: mysite") \
        and err.count('\n') == 1, err


def test_each_system_gets_its_own_general_settings():
    loaded = {s.system['name']: s for s in sites.load_site_files(*sites.system_directories())}
    assert loaded['local'].general['poll_rate_max'] > loaded['testbed'].general['poll_rate_max']
    assert loaded['example'].general == {}


def test_a_general_setting_reframe_does_not_know_is_named(tmp_path):
    (tmp_path / 'mysite.py').write_text(
        "system = {'name': 'mysite', 'hostnames': ['^mysite'], 'partitions': []}\n"
        "general = {'poll_rate_maximum': 10}\n")
    with pytest.raises(ConfigError, match=r"mysite.py: general.poll_rate_maximum is not a ReFrame "
                                          r"general setting of one system \(valid: .*poll_rate_max"):
        sites.load_site_files(tmp_path)
    (tmp_path / 'mysite.py').write_text(
        "system = {'name': 'mysite', 'hostnames': ['^mysite'], 'partitions': []}\n"
        "general = {'target_systems': ['other']}\n")
    with pytest.raises(ConfigError, match='general.target_systems is not'):
        sites.load_site_files(tmp_path)


def test_the_configuration_names_each_systems_own_settings():
    made = reframeconfig.configuration(['reframe', '--show-config'], {}, 'anyhost')
    own = {tuple(g['target_systems']): g for g in made.system_general}
    assert own[('local',)]['poll_rate_max'] == 50 and own[('testbed',)]['poll_rate_min'] == 4
    assert ('example',) not in own
    assert made.log_file == reframeconfig.RUN_LOG
    assert reframeconfig.configuration(['reframe', '-l'], {}, 'anyhost').log_file \
        == reframeconfig.LISTING_LOG
