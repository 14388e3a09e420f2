"""Stack detection with fake MPI prefixes: each is a real header, a real shared
library and a real wrapper script, so the probe compiles and runs for real."""
import dataclasses
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from hpcnet import mpi, stacks
from hpcnet.commands import stacks as stacks_command
from hpcnet.stacks import candidate, sources
from hpcnet.stacks.discover import Environment
from hpcnet.mpi import MpiFamily

SPACK_MPIRUN_NOTICE = (Path(__file__).parent / 'data' / 'spack-built' /
                       'openmpi-mpirun-legacylaunchers.sh')

CC = shutil.which('cc') or shutil.which('gcc')
pytestmark = pytest.mark.skipif(CC is None, reason='no C compiler (cc/gcc) on PATH')

HEADERS = {
    'openmpi': '#define OMPI_MAJOR_VERSION 9\n#define OMPI_MINOR_VERSION 8\n#define OMPI_RELEASE_VERSION 7\n',
    'mpich': '#define MPICH_VERSION "9.1.2"\n',
    'impi': '#define MPICH_VERSION "3.4a2"\n#define I_MPI_VERSION "2099.1.0"\n',
}
LIBRARIES = {
    'openmpi': 'Open MPI v9.8.7, package: fake',
    'mpich': 'MPICH Version:\\t9.1.2\\nMPICH Release date: never',
    'impi': 'Intel(R) MPI Library 2099.1.0 for Linux* OS\\n',
}


#: What the probe's "exchange" mode calls; ranks come from FAKE_RANK/FAKE_SIZE.
FAKE_MPI_API = '''typedef int MPI_Comm; typedef int MPI_Datatype; typedef struct { int s; } MPI_Status;
#define MPI_COMM_WORLD 0
#define MPI_INT 1
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
int MPI_Get_library_version(char *version, int *len);
int MPI_Init(int *argc, char ***argv);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int src, int rtag,
                 MPI_Comm comm, MPI_Status *status);
int MPI_Finalize(void);
'''
FAKE_MPI_LIBRARY = '''#include <stdlib.h>
static int env_int(const char *name) { const char *v = getenv(name); return v ? atoi(v) : 0; }
int MPI_Init(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }
int MPI_Comm_rank(MPI_Comm c, int *rank) { (void)c; *rank = env_int("FAKE_RANK"); return 0; }
int MPI_Comm_size(MPI_Comm c, int *size) { (void)c; *size = env_int("FAKE_SIZE"); return 0; }
int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int src, int rtag,
                 MPI_Comm comm, MPI_Status *status)
{ (void)sbuf; (void)scount; (void)stype; (void)dest; (void)stag; (void)rcount; (void)rtype;
  (void)rtag; (void)comm; (void)status; *(int *)rbuf = src; return 0; }
int MPI_Finalize(void) { return 0; }
'''
#: Runs the program (second to last argument, before "exchange") as two ranks;
#: FAKE_MPIRUN_OUTPUT replaces the run by a recorded output and exit status 143.
FAKE_MPIRUN = '''#!/bin/sh
if [ -n "$FAKE_MPIRUN_OUTPUT" ]; then cat "$FAKE_MPIRUN_OUTPUT"; exit 143; fi
for last in "$@"; do exe=$program; program=$last; done
FAKE_RANK=0 FAKE_SIZE=2 "$exe" exchange && FAKE_RANK=1 FAKE_SIZE=2 "$exe" exchange
'''
RECORDED = Path(__file__).parent / 'data' / 'stacks'


def make_fake_mpi(root: Path, header_family: str, library_family: str,
                  broken_wrapper: bool = False, tools=()) -> Path:
    '''A prefix with include/mpi.h, lib/libmpi.so and bin/mpicc.'''
    prefix = root / f'{header_family}-{library_family}'
    for d in ('bin', 'include', 'lib'):
        (prefix / d).mkdir(parents=True, exist_ok=True)
    (prefix / 'include' / 'mpi.h').write_text(
        '#pragma once\n#define MPI_MAX_LIBRARY_VERSION_STRING 256\n'
        + HEADERS[header_family] + FAKE_MPI_API)
    src = prefix / 'lib' / 'mpi.c'
    src.write_text('#include <string.h>\n#include <mpi.h>\n'
                   'int MPI_Get_library_version(char *v, int *len) {\n'
                   f'  strcpy(v, "{LIBRARIES[library_family]}"); *len = (int)strlen(v); return 0; }}\n'
                   + FAKE_MPI_LIBRARY)
    subprocess.run([CC, '-shared', '-fPIC', f'-I{prefix}/include', str(src), '-o',
                    str(prefix / 'lib' / 'libmpi.so')], check=True)
    compiler = f'${{OMPI_CC:-${{MPICH_CC:-${{I_MPI_CC:-{CC}}}}}}}'
    flags = f'-L{prefix}/lib -Wl,-rpath,{prefix}/lib -lmpi'
    # It answers what real wrappers answer about their compiler command.
    body = ('echo "mpicc: cannot find the compiler" >&2; exit 1\n' if broken_wrapper else
            f'case "$1" in --showme:command) echo "{compiler}"; exit 0;;\n'
            f'  -show) echo "{compiler} -I{prefix}/include {flags}"; exit 0;; esac\n'
            f'exec "{compiler}" -I{prefix}/include "$@" {flags}\n')
    wrapper = prefix / 'bin' / 'mpicc'
    wrapper.write_text('#!/bin/sh\n' + body)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    launcher = prefix / 'bin' / 'mpirun'
    launcher.write_text(FAKE_MPIRUN)
    launcher.chmod(0o755)
    for tool in tools:
        t = prefix / 'bin' / tool
        t.write_text('#!/bin/sh\n')
        t.chmod(0o755)
    return prefix


@pytest.fixture
def compiler():
    return stacks.Compiler('gcc', '99.1.0', CC)


def discover(tmp_path, prefixes, compilers):
    def source(state):
        return [stacks.prefix_candidate(p, f'fake-{p.name}', 'test') for p in prefixes]
    return stacks.discover(tmp_path / 'state', sources=[source], compilers=compilers)


def test_working_prefixes_become_named_environments(tmp_path, compiler):
    prefixes = [make_fake_mpi(tmp_path, 'openmpi', 'openmpi'),
                make_fake_mpi(tmp_path, 'mpich', 'mpich'),
                make_fake_mpi(tmp_path, 'impi', 'impi', tools=('IMB-MPI1', 'impi_info'))]
    found = discover(tmp_path, prefixes, [compiler])
    assert found.rejected == []
    by_name = {e.name: e for e in found.environments}
    assert set(by_name) == {'gcc99-openmpi9', 'gcc99-mpich9', 'gcc99-impi2099'}
    impi = by_name['gcc99-impi2099']
    assert impi.mpi.family == MpiFamily.IMPI and impi.mpi.version == '2099.1.0'
    assert 'imb' in impi.features and 'impi' in impi.features
    assert 'imb' not in by_name['gcc99-openmpi9'].features
    cfg = impi.to_reframe(['local'])
    assert cfg['cc'] == str(prefixes[2] / 'bin' / 'mpicc')
    assert ['I_MPI_CC', CC] in cfg['env_vars']
    assert ['I_MPI_ROOT', str(prefixes[2])] in cfg['env_vars']
    assert cfg['extras']['tools']['IMB-MPI1'].endswith('bin/IMB-MPI1')


def test_an_environment_under_a_path_with_blanks_exports_it_whole(tmp_path, compiler):
    '''ReFrame writes each variable as `export NAME=VALUE`: an MPI under a
    directory with a blank gets its PATH and library path exported whole,
    and $PATH still expands.'''
    prefix = make_fake_mpi(tmp_path, 'impi', 'impi')
    found = discover(tmp_path, [prefix], [compiler])
    env = found.environments[0]
    blank = f'{tmp_path}/my mpi'
    cand = env.mpi.candidate
    moved = dataclasses.replace(cand, bindir=cand.bindir.replace(str(prefix), blank), env_vars=tuple(
        (name, value.replace(str(prefix), blank)) for name, value in cand.env_vars))
    env = dataclasses.replace(env, mpi=dataclasses.replace(env.mpi, candidate=moved))
    script = ''.join(f'export {name}={value}\n' for name, value in env.env_vars())
    script += 'printf "%s\\n" "$PATH" "$LD_LIBRARY_PATH" "$I_MPI_CC"\n'
    out = subprocess.run(['sh', '-c', script], capture_output=True, text=True, check=True,
                         env={'PATH': '/usr/bin:/bin', 'LD_LIBRARY_PATH': '/before'})
    assert out.stdout.splitlines() == [f'{blank}/bin:/usr/bin:/bin', f'{blank}/lib:/before', CC]


def test_header_and_library_of_different_mpis_is_rejected(tmp_path, compiler):
    # The Debian trap: MPICH's name, Open MPI's library.
    found = discover(tmp_path, [make_fake_mpi(tmp_path, 'mpich', 'openmpi')], [compiler])
    assert found.environments == []
    (what, why), = found.rejected
    assert 'headers are mpich but the library loaded at run time is openmpi' in why


def test_source_claim_checked_against_library(tmp_path, compiler):
    prefix = make_fake_mpi(tmp_path, 'openmpi', 'openmpi')

    def source(state):
        return [stacks.prefix_candidate(prefix, 'claims-mpich', 'test', MpiFamily.MPICH)]
    found = stacks.discover(tmp_path / 'state', sources=[source], compilers=[compiler])
    assert found.environments == []
    assert 'expected mpich but' in found.rejected[0][1]


def test_broken_wrapper_is_left_out_with_its_message(tmp_path, compiler):
    good = make_fake_mpi(tmp_path, 'openmpi', 'openmpi')
    bad = make_fake_mpi(tmp_path / 'b', 'mpich', 'mpich', broken_wrapper=True)
    found = discover(tmp_path, [good, bad], [compiler])
    assert [e.name for e in found.environments] == ['gcc99-openmpi9']
    (what, why), = found.rejected
    assert 'cannot compile an MPI program: mpicc: cannot find the compiler' in why


def test_missing_library_at_run_time_is_rejected(tmp_path, compiler):
    prefix = make_fake_mpi(tmp_path, 'openmpi', 'openmpi')
    found = discover(tmp_path, [prefix], [compiler])
    assert found.environments
    (prefix / 'lib' / 'libmpi.so').unlink()
    # -lmpi now finds whatever other libmpi the system has (or none): either
    # way the probe must not accept it.
    found = stacks.discover(tmp_path / 'state2', sources=[lambda s: [
        stacks.prefix_candidate(prefix, 'gone', 'test')]], compilers=[compiler])
    assert found.environments == [] and found.rejected
    assert any(w in found.rejected[0][1] for w in ('cannot compile', 'library loaded at run time'))


def test_cache_is_reused_and_invalidated(tmp_path, compiler):
    prefix = make_fake_mpi(tmp_path, 'openmpi', 'openmpi')
    first = discover(tmp_path, [prefix], [compiler])
    cache = tmp_path / 'state' / 'stacks.json'
    assert cache.exists()
    again = discover(tmp_path, [prefix], [compiler])
    assert [e.name for e in again.environments] == [e.name for e in first.environments]
    assert again.environments[0] == first.environments[0]
    # A changed wrapper invalidates the cache.
    wrapper = prefix / 'bin' / 'mpicc'
    wrapper.write_text('#!/bin/sh\nexit 1\n')
    os.utime(wrapper, ns=(1, 1))
    assert discover(tmp_path, [prefix], [compiler]).environments == []


def test_compilers_are_deduplicated_by_family_and_major(tmp_path):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    for name in ('gcc', 'gcc-42'):
        (bindir / name).symlink_to(CC)
    comps = stacks.detect_compilers(str(bindir))
    labels = [c.label for c in comps]
    assert len(labels) == len(set(labels)) == 1
    # The versioned name is kept: it does not move when 'gcc' is switched.
    assert comps[0].command.endswith('gcc-42')


def test_library_family_patterns():
    assert mpi.library_family('Open MPI v4.1.4, package: Debian') == ('openmpi', '4.1.4')
    assert mpi.library_family('MPICH Version:\t4.0.2\nMPICH Release') == ('mpich', '4.0.2')
    assert mpi.library_family('Intel(R) MPI Library 2021.19.0 for Linux* OS') == ('impi', '2021.19.0')
    assert mpi.library_family('MVAPICH2 Version      :\t2.3.7') == ('mvapich2', '2.3.7')
    assert mpi.library_family('SomeOtherMPI 1.0') is None


def test_bad_prefix_variable_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv('HPCNET_MPI_PREFIXES', str(tmp_path / 'nothing'))
    with pytest.raises(stacks.StackError, match='HPCNET_MPI_PREFIXES: .* has no bin/mpicc'):
        stacks.extra_prefix_candidates(tmp_path)


def test_spack_environment_source(tmp_path, monkeypatch, compiler):
    '''A Spack environment's MPIs become candidates, and the OSU build
    against one becomes its tools (spack itself replaced by a script that
    answers `find --format` as Spack does).'''
    mpi = make_fake_mpi(tmp_path / 'opt', 'openmpi', 'openmpi')
    osu = tmp_path / 'opt' / 'osu-micro-benchmarks-7.4-gcc12-abcdefg'
    pt2pt = osu / 'libexec' / 'osu-micro-benchmarks' / 'mpi' / 'pt2pt'
    pt2pt.mkdir(parents=True)
    for tool in ('osu_latency', 'osu_bw'):
        (pt2pt / tool).write_text('#!/bin/sh\n')
        (pt2pt / tool).chmod(0o755)
    bindir = tmp_path / 'spackbin'
    bindir.mkdir()
    spack = bindir / 'spack'
    spack.write_text('#!/bin/sh\n'
                     f'[ "$1 $2 $3 $4" = "-e {tmp_path}/env find --format" ] || exit 3\n'
                     "echo '==> In environment env'\n"
                     f'if [ "$5" = "{sources.SPACK_FORMAT}" ] && [ $# = 5 ]; then\n'
                     f"  echo 'openmpi|9.8.7|abcdefg|{mpi}|gcc|99.1.0'\n"
                     f"  echo 'osu-micro-benchmarks|7.4|hijklmn|{osu}|gcc|99.1.0'\n"
                     "  echo 'zlib|1.3|opqrstu|/nowhere|none|none'\n"
                     f'elif [ "$5 $6" = "{sources.SPACK_MPI_OF_FORMAT} {sources.SPACK_MPI_QUERY}" ]; then\n'
                     f"  echo 'osu-micro-benchmarks|hijklmn|{mpi}|gcc|99.1.0'\n"
                     'else exit 4; fi\n')
    spack.chmod(0o755)
    monkeypatch.setenv('PATH', f'{bindir}:{os.environ["PATH"]}')
    monkeypatch.setenv(stacks.SPACK_ENV_VAR, str(tmp_path / 'env'))
    found = stacks.discover(tmp_path / 'state', sources=[stacks.spack_candidates],
                            compilers=[compiler, stacks.Compiler('clang', '14.0.6', CC)])
    (env,) = found.environments          # gcc 99 built it: not paired with clang
    assert env.name == 'gcc99-openmpi9-abcdefg' and env.mpi.candidate.source == 'spack'
    assert 'osu' in env.features
    assert dict(env.mpi.tools)['osu_bw'] == str(pt2pt / 'osu_bw')


def test_spack_environment_without_spack_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(stacks.SPACK_ENV_VAR, str(tmp_path))
    monkeypatch.setenv('PATH', str(tmp_path))
    with pytest.raises(stacks.StackError, match='HPCNET_SPACK_ENV=.*spack command is not on PATH'):
        stacks.spack_candidates(tmp_path)


def test_missing_piece_names_the_library_and_what_provides_it():
    recorded = (RECORDED / 'impi-2021.19-tcp-without-libfabric.txt').read_text()
    assert stacks.missing_piece(recorded) == ('libfabric.so.1 not found: Debian package '
                                              'libfabric1')
    # The dynamic loader's own message, for a library without a known provider.
    assert stacks.missing_piece('./probe: error while loading shared libraries: libfoo.so.3: '
                                'cannot open shared object file: No such file or directory') \
        == ('libfoo.so.3 not found: install what provides it, or add its directory to '
            'LD_LIBRARY_PATH')
    assert stacks.missing_piece('Abort(1): Fatal error in internal_Init') is None


def test_fabric_probe_records_a_missing_piece_per_fabric(tmp_path, compiler, monkeypatch):
    prefix = make_fake_mpi(tmp_path, 'impi', 'impi')
    (env,) = discover(tmp_path, [prefix], [compiler]).environments
    assert env.mpi.fabric_gaps == ()
    # Intel MPI's real output without libfabric, on every fabric of this fake.
    monkeypatch.setenv('FAKE_MPIRUN_OUTPUT',
                       str(RECORDED / 'impi-2021.19-tcp-without-libfabric.txt'))
    found = stacks.discover(tmp_path / 'state', compilers=[compiler], fabrics=['tcp'],
                            sources=[lambda state: [stacks.prefix_candidate(prefix, 'fake',
                                                                            'test')]])
    (env,) = found.environments
    assert env.mpi.fabric_gaps == (('tcp', 'libfabric.so.1 not found: Debian package '
                                           'libfabric1'),)
    assert env.stack().fabric_gap('tcp').startswith('libfabric.so.1 not found')
    assert env.stack().fabric_gap('shm') is None
    assert env.to_reframe(['local'])['extras']['fabric_gaps'] == dict(env.mpi.fabric_gaps)


def test_a_fabric_probe_failing_otherwise_is_no_skip(tmp_path, compiler, monkeypatch):
    prefix = make_fake_mpi(tmp_path, 'openmpi', 'openmpi')
    broken = tmp_path / 'broken.txt'
    broken.write_text('mpirun noticed that process rank 0 exited on signal 11 (SIGSEGV)\n')
    monkeypatch.setenv('FAKE_MPIRUN_OUTPUT', str(broken))
    found = discover(tmp_path, [prefix], [compiler])
    (env,) = found.environments
    assert env.mpi.fabric_gaps == ()        # the checks run there and fail, saying why
    assert sorted(what for what, _ in found.fabric_failures) == [
        f'fake-{prefix.name} on shm', f'fake-{prefix.name} on tcp']
    assert all('exited 143: mpirun noticed that process rank 0 exited on signal 11' in why
               for _, why in found.fabric_failures)


#: A fake launcher's first lines: it says which program it is, and the
#: personality PRRTE is told to take (Open MPI 5's mpirun sets it).
STARTED = '#!/bin/sh\necho "started $0${PRTE_MCA_schizo_proxy:+ as $PRTE_MCA_schizo_proxy}" >&2\n'


def make_spack_open_mpi(root: Path, kept=('orterun',)) -> Path:
    '''A fake Open MPI as Spack installs it ``~legacylaunchers
    schedulers=slurm``: mpirun and mpiexec are the notice Spack wrote in their
    place (recorded, tests/data/spack-built), each of ``kept`` a working fake
    launcher that says on stderr which program it is.'''
    prefix = make_fake_mpi(root, 'openmpi', 'openmpi')
    for name in ('mpirun', 'mpiexec'):
        shutil.copy(SPACK_MPIRUN_NOTICE, prefix / 'bin' / name)
    for name in kept:
        launcher = prefix / 'bin' / name
        launcher.write_text(FAKE_MPIRUN.replace('#!/bin/sh\n', STARTED, 1))
        launcher.chmod(0o755)
    return prefix


def run_in_environment(env, command: str,
                       path: str = '/usr/bin:/bin') -> subprocess.CompletedProcess:
    '''``command`` in a shell that exported ``env``'s variables as ReFrame
    does (``export NAME=VALUE``) over PATH ``path`` (what a module load gave).'''
    script = ''.join(f'export {name}={value}\n' for name, value in env.env_vars()) + command
    return subprocess.run(['sh', '-c', script], capture_output=True, text=True,
                          env={'PATH': path})


def test_spack_notice_in_place_of_mpirun_is_a_gap_on_every_fabric(tmp_path, compiler):
    prefix = make_spack_open_mpi(tmp_path, kept=())
    found = discover(tmp_path, [prefix], [compiler])
    (env,) = found.environments
    assert found.fabric_failures == []
    assert env.mpi.candidate.launcher_dir == ''
    assert [fabric for fabric, _ in env.mpi.fabric_gaps] == ['shm', 'tcp']
    assert all("Spack's notice for an Open MPI built ~legacylaunchers" in why
               and 'no orterun or prterun beside it' in why and 'srun' in why
               for _, why in env.mpi.fabric_gaps)


@pytest.mark.parametrize('kept', ['orterun', 'prterun'])
def test_a_spack_open_mpi_without_mpirun_starts_ranks_with_the_launcher_it_kept(
        tmp_path, compiler, kept):
    '''Open MPI 4 keeps orterun, Open MPI 5 prterun: ``mpirun`` and
    ``mpiexec`` on the environment's PATH run it, and the fabric probe
    started it (no gap, no failure).'''
    prefix = make_spack_open_mpi(tmp_path, kept=(kept,))
    found = discover(tmp_path, [prefix], [compiler])
    (env,) = found.environments
    assert (env.mpi.fabric_gaps, found.fabric_failures) == ((), [])
    launcher_dir = env.mpi.candidate.launcher_dir
    assert launcher_dir.startswith(str(tmp_path / 'state' / 'shims'))
    assert env.mpi.candidate.launcher == os.path.join(launcher_dir, 'mpirun')
    for name in ('mpirun', 'mpiexec'):
        res = run_in_environment(env, f'command -v {name}; {name} -np 2 /bin/echo exchange')
        assert res.stdout.splitlines() == [f'{launcher_dir}/{name}', 'exchange', 'exchange']
        # Open MPI 5's prterun started as its own mpirun starts it (as Open MPI's).
        personality = ' as ompi' if kept == 'prterun' else ''
        assert res.stderr == f'started {prefix}/bin/{kept}{personality}\n'
    # The wrapper and the tools stay the MPI's own.
    assert env.to_reframe(['local'])['cc'] == str(prefix / 'bin' / 'mpicc')
    assert run_in_environment(env, 'command -v mpicc').stdout == f'{prefix}/bin/mpicc\n'


def test_a_module_environment_puts_the_kept_launcher_before_its_modules_path(tmp_path, compiler):
    '''A Spack module's PATH puts its bindir (with the notice) first: the
    job exports the launcher directory after loading the module.'''
    prefix = make_spack_open_mpi(tmp_path)
    (env,) = discover(tmp_path, [prefix], [compiler]).environments
    cand = env.mpi.candidate
    as_module = dataclasses.replace(cand, modules=('openmpi/4.1.4-gcc-12.2.0-wlpcv5h',),
                                    env_vars=(('PATH', f'{cand.bindir}:$PATH'),))
    env = dataclasses.replace(env, mpi=dataclasses.replace(env.mpi, candidate=as_module))
    assert env.env_vars()[0] == ['PATH', f'{cand.launcher_dir}:$PATH']
    # The module load put its bindir first; then ReFrame exports the variables.
    res = run_in_environment(env, 'command -v mpirun', path=f'{cand.bindir}:/usr/bin:/bin')
    assert res.stdout == f'{cand.launcher_dir}/mpirun\n'


def test_a_shim_runs_a_target_whose_path_has_blanks_and_quotes(tmp_path):
    target = tmp_path / "my 'mpi'" / 'orterun'
    target.parent.mkdir()
    target.write_text('#!/bin/sh\necho "ran $* with $X"\n')
    target.chmod(0o755)
    bindir = candidate.shim_dir(tmp_path / 'state', 'odd/label', {'mpirun': target},
                                {'X': "a 'b' $c"})
    assert Path(bindir) == tmp_path / 'state' / 'shims' / 'odd_label' / 'bin'
    res = subprocess.run([f'{bindir}/mpirun', '-np', '2'], capture_output=True, text=True,
                         check=True)
    assert res.stdout == "ran -np 2 with a 'b' $c\n"


def test_only_spacks_notice_is_taken_for_no_launcher(tmp_path):
    assert stacks.launcher_notice(str(SPACK_MPIRUN_NOTICE)) is not None
    script = tmp_path / 'mpirun'
    script.write_text('#!/bin/sh\nexec mpiexec.hydra "$@"\n')     # a real launcher script
    assert stacks.launcher_notice(str(script)) is None
    assert stacks.launcher_notice('/bin/true') is None                 # an ELF launcher
    assert stacks.launcher_notice(str(tmp_path / 'absent')) is None   # fails with its own message


def test_a_spack_build_pairs_only_with_the_compilers_it_was_built_with(tmp_path):
    prefix = make_fake_mpi(tmp_path, 'openmpi', 'openmpi')
    found_here = [stacks.Compiler('gcc', '12.2.0', CC), stacks.Compiler('gcc', '11.3.0', CC),
                  stacks.Compiler('clang', '14.0.6', CC)]

    def built_with(*compilers):
        def source(state):
            cand = stacks.prefix_candidate(prefix, 'spack-openmpi-9.8.7-abcdefg', 'spack')
            return [dataclasses.replace(cand, env_name='openmpi9-abcdefg', built_with=compilers)]
        return stacks.discover(tmp_path / f'state-{len(compilers)}', sources=[source],
                               compilers=found_here, fabrics=[])

    found = built_with(('clang', '14.0.6'))
    assert [env.name for env in found.environments] == ['clang14-openmpi9-abcdefg']
    found = built_with(('clang', '14.0.6'), ('gcc', '12.3.0'))    # the same majors
    assert sorted(env.name for env in found.environments) == [
        'clang14-openmpi9-abcdefg', 'gcc12-openmpi9-abcdefg']
    found = built_with(('nvhpc', '24.5'), ('gcc', '13.2.0'), ('x', '1'))
    assert found.environments == []
    assert found.rejected == [('spack-openmpi-9.8.7-abcdefg', 'built with gcc 13.2.0, nvhpc 24.5, '
                                                             'x 1: no such compiler on this host')]


def test_rdma_fabrics_are_not_probed_on_the_host(tmp_path, compiler):
    with pytest.raises(stacks.StackError, match="fabric 'roce' cannot be probed on one host"):
        stacks.discover(tmp_path / 'state', sources=[], compilers=[compiler], fabrics=['roce'])


def test_hpcnet_stacks_names_the_launcher_spack_kept(tmp_path, compiler, monkeypatch, capsys):
    prefix = make_spack_open_mpi(tmp_path)
    found = discover(tmp_path, [prefix], [compiler])
    monkeypatch.setattr(stacks, 'discover', lambda use_cache, site: found)
    args = SimpleNamespace(spack_lock=None, system=None, refresh=False, json=False, modules=False)
    assert stacks_command.run(args) == 0
    assert f'starts ranks with {prefix}/bin/orterun without a scheduler ({prefix}/bin/mpirun is ' \
           "Spack's ~legacylaunchers notice)" in capsys.readouterr().out


def test_the_cache_record_of_an_environment_reads_back_as_itself():
    '''The discovery cache is the Environment's own record: what a load that
    probes nothing reads back is the environment the probe made.'''
    candidate = stacks.MpiCandidate(
        label='spack-openmpi', source='spack', wrapper='/opt/ompi/bin/mpicc',
        bindir='/opt/ompi/bin', prefix='/opt/ompi', env_vars=(('LD_LIBRARY_PATH', '/opt/ompi/lib'),),
        modules=('openmpi/4.1.6',), transport_layer='ucx', tool_prefixes=('/opt/osu',),
        built_with=(('gcc', '12.2.0'),), spec='openmpi@4.1.6 /abcdefg')
    env = Environment(stacks.Compiler('gcc', '12.2.0', '/usr/bin/gcc'),
                      stacks.MpiStack(candidate, 'openmpi', '4.1.6', 'Open MPI v4.1.6',
                                      (('osu_latency', '/opt/osu/bin/osu_latency'),),
                                      (('tcp', 'libfabric.so.1 not found'),)),
                      primary=True)
    found = stacks.Discovery([env], [('x', 'why')], [('y on tcp', 'why')])
    assert stacks.Discovery.from_json(json.loads(json.dumps(found.to_json()))) == found
    assert Environment.from_json(json.loads(json.dumps(env.to_json()))).stack() == env.stack()
