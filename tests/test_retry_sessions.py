"""The repeats `hpcnet run` runs again go together: one ReFrame session per
partition and environment in each round, a case at most once a session
(hpcnet.session.runner._run_again).  ReFrame is replaced by a fake that
writes the report a session of the named cases would."""
from __future__ import annotations

import json

from hpcnet.session import runner
from hpcnet.session.verdict import KNOWN_ISSUE_MARKER


def case(name, environ, result='fail', partition='nodes'):
    return {'name': name, 'system': 'testbed', 'partition': partition, 'environ': environ,
            'hashcode': f'h{name}', 'result': result,
            'fail_reason': f'{KNOWN_ISSUE_MARKER}: hung in MPI_Finalize' if result == 'fail'
            else None}


def test_repeats_run_again_share_a_session_per_partition_and_environment(monkeypatch, tmp_path):
    # 'pp' hangs in repeats 1 and 2, and again in repeat 2's first retry;
    # 'pi' in its repeat 2; 'bw' on another environment; 'ok' never.
    outcomes = {('pp', 'mpich'): ['pass', 'fail', 'pass'], ('pi', 'mpich'): ['pass'],
                ('bw', 'ompi'): ['pass']}
    sessions = []

    def reframe_cmd(name, args):
        report = tmp_path / f'{name}-{len(sessions)}.json'
        return [*args, report], report

    def run_reframe(cmd, env):
        args, report = cmd[:-1], cmd[-1]
        hashes = [args[i + 1][2:] for i, a in enumerate(args) if a == '-n']
        environ = args[args.index('-p') + 1].strip('^$')
        sessions.append((environ, sorted(hashes)))
        cases = [case(h, environ, outcomes[h, environ].pop(0)) for h in hashes]
        report.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': cases}]}))
        return 0
    monkeypatch.setattr(runner, 'reframe_cmd', reframe_cmd)
    monkeypatch.setattr(runner, '_run_reframe', run_reframe)
    repeats = {('pp', 'testbed', 'nodes', 'mpich'): [case('pp', 'mpich'), case('pp', 'mpich')],
               ('pi', 'testbed', 'nodes', 'mpich'): [case('pi', 'mpich', 'pass'),
                                                     case('pi', 'mpich')],
               ('bw', 'testbed', 'nodes', 'ompi'): [case('bw', 'ompi')],
               ('ok', 'testbed', 'nodes', 'ompi'): [case('ok', 'ompi', 'pass')]}
    retried = runner._run_again('run', repeats, ['--system', 'testbed'], [], None,
                                remeasure=True)
    # Round 1: pp's repeat 1 and pi's together, bw's alone; rounds 2 and 3:
    # pp's repeat 2, twice.
    assert sessions == [('ompi', ['bw']), ('mpich', ['pi', 'pp']), ('mpich', ['pp']),
                        ('mpich', ['pp'])]
    assert [(tc['name'], tc['repeat'], tc['attempts'], tc['result']) for tc in retried] == [
        ('bw', 1, 2, 'pass'), ('pi', 2, 2, 'pass'), ('pp', 1, 2, 'pass'), ('pp', 2, 3, 'pass')]
