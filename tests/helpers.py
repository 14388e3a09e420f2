"""What the test files share: hpcnet run as a command or in this process, run
reports and their cases as ReFrame writes them, and the rows of the session's
fault matrix (conftest.FAULT_MATRIX)."""
import contextlib
import copy
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import conftest
from hpcnet import metrics
from hpcnet import testbed as tbm
from hpcnet.acceptance.history import metricindex
from hpcnet.constants import FABRICS_FILE
from hpcnet.parsers.errors import BenchmarkOutputError

HPCNET = Path(sys.executable).with_name('hpcnet')

#: A bandwidth case of the testbed as a run report records it: Open MPI over
#: tcp on two nodes.
TESTBED_CASE = {'name': 'hpcnet_p2p %scale=2_nodes %mode=bw', 'system': 'testbed',
                'partition': 'eth', 'environ': 'gcc12-openmpi4', 'fixture': False,
                'result': 'pass', 'mpi_family': 'openmpi', 'mpi_library': 'Open MPI v4.1.4',
                'transport': "openmpi used tcp on fabric 'tcp'", 'job_nodelist': ['cn1', 'cn2'],
                'link_rate_bps': 1000000000, 'hashcode': '5b414a9c'}


def run_hpcnet(*args, env=None, cwd=None, timeout=600,
               stderr=subprocess.PIPE) -> subprocess.CompletedProcess:
    '''`hpcnet ARGS` as a site runs it: ``env`` over this process's
    environment; ``stderr=subprocess.STDOUT`` merges stderr into stdout.'''
    return subprocess.run([str(HPCNET), *args], text=True, stdout=subprocess.PIPE, stderr=stderr,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


def hpcnet_in_process(*argv) -> tuple:
    '''(exit code, stdout, stderr) of `hpcnet ARGV` run in this process
    (argparse's exit is its exit code).'''
    from hpcnet import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as stop:
            code = stop.code
    return code, out.getvalue(), err.getvalue()


def wobble(center: float, n: int, seed: int, spread: float = 0.01) -> list:
    '''n samples within +-``spread`` of ``center`` (a healthy metric's wobble).'''
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def perfvalues(case: dict, values: dict) -> dict:
    '''ReFrame's perfvalues of ``case`` for ``values`` ({metric: value}, or
    {metric: (value, unit)} for a unit other than the catalogue's): each
    passed, with no reference.'''
    prefix = f'{case["system"]}:{case["partition"]}'
    entries = {}
    for metric, value in values.items():
        if isinstance(value, tuple):
            value, unit = value
        else:
            unit = metrics.lookup(case['name'], metric).unit
        entries[f'{prefix}:{metric}'] = [value, None, None, None, unit, 'pass']
    return entries


def report_case(values: dict | None = None, base: dict = TESTBED_CASE, **fields) -> dict:
    '''A test case of a run report: ``base`` with ``fields`` over it, and
    with ``values`` its perfvalues (perfvalues()).'''
    made = {**copy.deepcopy(base), **fields}
    if values is not None:
        made['perfvalues'] = perfvalues(made, values)
    return made


def run_report(runs: list, uuid: str = 'session', session_info: dict | None = None,
               **extra) -> dict:
    '''A run report of one session: ``runs`` one list of cases per repeat
    (a lone case is a list of one), each case given its repeat's run_index;
    ``extra`` its other top-level keys.'''
    listed = [cases if isinstance(cases, list) else [cases] for cases in runs]
    repeats = [{'run_index': i, 'testcases': [{**copy.deepcopy(tc), 'run_index': i} for tc in cases]}
               for i, cases in enumerate(listed)]
    return {'session_info': {**(session_info or {}), 'uuid': uuid}, 'runs': repeats, **extra}


def write_report(path: Path, runs: list, uuid: str, **extra) -> str:
    '''run_report() written to ``path``; its path, as the commands take it.'''
    path.write_text(json.dumps(run_report(runs, uuid, **extra)))
    return str(path)


def results_db(path: Path, reports: list) -> Path:
    '''A results database at ``path`` holding ``reports``.'''
    return metricindex.store_reports(path, reports)


def last_line(res: subprocess.CompletedProcess) -> str:
    '''The last line hpcnet wrote: of stderr, else of stdout.'''
    return ((res.stderr.strip() or res.stdout.strip()).splitlines() or [''])[-1]


def record_fault(fault: str, outcome: int | str, reason: str) -> None:
    '''A row of the session's fault matrix (conftest): the fault, what it
    gave (an exit code, or what became of it) and the line that says why.'''
    verdict = f'exit {int(outcome)}' if isinstance(outcome, int) else outcome
    conftest.FAULT_MATRIX.append((fault, verdict, reason))


def fault_row(fault: str, res: subprocess.CompletedProcess, expected: int,
              shown: str | None = None) -> str:
    '''Asserts that hpcnet's run ``res`` of ``fault`` exited ``expected``
    with no traceback, and records its row: the reason is the first line of
    stdout holding ``shown``, without it the last line hpcnet wrote.'''
    assert res.returncode == expected, \
        f'{fault}: exit {res.returncode}\n{res.stdout[-3000:]}{res.stderr}'
    assert 'Traceback' not in res.stderr, res.stderr
    if shown is None:
        reason = last_line(res)
    else:
        reason = next((line.strip() for line in res.stdout.splitlines() if shown in line), '')
        assert reason, f'{fault}: no line holds {shown!r}\n{res.stdout[-3000:]}'
    record_fault(fault, res.returncode, reason)
    return reason


def parse_error(parse, text: str, *fragments: str, line=None, source='damaged.txt',
                **kw) -> BenchmarkOutputError:
    '''The error ``parse`` (a benchmark's output parser) raises on ``text``:
    its message starts with ``source`` (and ``line``) and holds every one of
    ``fragments``.'''
    with pytest.raises(BenchmarkOutputError) as info:
        parse(text, source=source, **kw)
    err = info.value
    message = str(err)
    assert message.startswith(source), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    if line is not None:
        assert err.line == line, message
        assert message.startswith(f'{source}:{line}: '), message
    return err


def registered_entry(registry, entry):
    '''A fixture: ``entry`` in ``registry`` (hpcnet.fabrics', hpcnet.mpi's)
    for the length of a test.'''
    @pytest.fixture
    def fixture():
        registry.register(entry)
        yield entry
        registry.unregister(entry.name)
    return fixture


def shipped_fabric_table() -> dict:
    '''A copy of the fabric table hpcnet ships (config/fabrics.yaml) to edit.'''
    return yaml.safe_load(FABRICS_FILE.read_text())


def write_fabric_table(path: Path, table: dict) -> Path:
    '''``table`` written where HPCNET_FABRICS_FILE may name it.'''
    path.write_text(yaml.safe_dump(table))
    return path


def needs_testbed(integration: bool = True) -> list:
    '''The pytestmark of a module whose tests run on the Slurm testbed:
    skipped, with the reason, where this host cannot start one.'''
    unavailable = tbm.unavailable_reason()
    return [pytest.mark.testbed, *([pytest.mark.integration] if integration else []),
            pytest.mark.skipif(unavailable is not None, reason=unavailable or '')]
