"""spack-env/spack.yaml: every variant it sets exists in the recipes of the
Spack release it targets (recorded below from spack/spack-packages v2025.11.0,
the builtin packages Spack 1.1.0 pins) — the file once set openmpi +pmix,
which Spack 1.1 refused at once."""

import yaml

from hpcnet.paths import PROJECT_ROOT

#: Variant names per package, from the package.py files of v2025.11.0.
VARIANTS = {
    'openmpi': {'atomics', 'cray-xpmem', 'cxx', 'cxx_exceptions', 'debug', 'fabrics', 'fortran',
                'gpfs', 'internal-hwloc', 'internal-libevent', 'internal-pmix', 'ipv6', 'java',
                'legacylaunchers', 'lustre', 'memchecker', 'openshmem', 'orterunprefix', 'pmi',
                'romio', 'romio-filesystem', 'rsh', 'schedulers', 'sqlite3', 'static',
                'thread_multiple', 'two_level_namespace', 'vt', 'wrapper-rpath'},
    'mpich': {'argobots', 'datatype-engine', 'device', 'fortran', 'hcoll', 'hwloc', 'hydra',
              'level_zero', 'libxml2', 'netmod', 'pci', 'pmi', 'romio', 'slurm', 'vci', 'verbs',
              'wrapperrpath', 'xpmem'},
    'mvapich2': {'alloca', 'ch3_rank_bits', 'cuda', 'debug', 'fabrics', 'file_systems',
                 'hwloc_graphics', 'hwlocv2', 'pmi_version', 'process_managers', 'regcache',
                 'threads', 'wrapperrpath'},
    'intel-oneapi-mpi': {'classic-names', 'external-libfabric', 'generic-names', 'ilp64'},
    'ucx': {'assertions', 'backtrace_detail', 'cm', 'cma', 'dc', 'debug', 'dm', 'examples',
            'gdrcopy', 'gtest', 'ib_hw_tm', 'java', 'knem', 'libs', 'logging', 'mlx5_dv', 'numa',
            'openmp', 'opt', 'optimizations', 'parameter_checking', 'pic', 'rc', 'rdmacm', 'rocm',
            'simd', 'thread_multiple', 'ucg', 'ud', 'verbs', 'vfs', 'xpmem'},
    'libfabric': {'debug', 'fabrics', 'gdrcopy', 'kdreg', 'level_zero', 'uring'},
}
#: Values of the multi-valued variants the file sets.
VALUES = {('openmpi', 'fabrics'): {'psm', 'psm2', 'verbs', 'mxm', 'ucx', 'ofi', 'fca', 'hcoll',
                                   'ucc', 'xpmem', 'cma', 'knem', 'auto', 'none'},
          ('openmpi', 'schedulers'): {'alps', 'lsf', 'tm', 'slurm', 'sge', 'loadleveler', 'auto',
                                      'none'},
          ('mpich', 'device'): {'ch3', 'ch4', 'ch3:sock'},
          ('mpich', 'netmod'): {'tcp', 'mxm', 'ofi', 'ucx'},
          ('mpich', 'pmi'): {'default', 'pmi', 'pmi2', 'pmix', 'cray'},
          ('mvapich2', 'fabrics'): {'psm', 'psm2', 'sock', 'nemesisib', 'nemesis', 'mrail',
                                    'nemesisibtcp', 'nemesistcpib', 'nemesisofi'},
          ('libfabric', 'fabrics'): {'cxi', 'efa', 'gni', 'lnx', 'mlx', 'mrail', 'opx', 'psm',
                                     'psm2', 'psm3', 'rxm', 'rxd', 'shm', 'sockets', 'tcp', 'ucx',
                                     'udp', 'usnic', 'verbs', 'xpmem'},
          ('mvapich2', 'process_managers'): {'auto', 'slurm', 'hydra', 'gforker', 'remshell'}}


def _variants(spec: str):
    name = spec.split('@')[0].split()[0]
    for token in spec.split()[1:]:
        if token.startswith(('+', '~')):
            yield name, token[1:], None
        elif '=' in token:
            key, value = token.split('=', 1)
            yield name, key, set(value.split(','))


def test_every_variant_exists_in_the_targeted_recipes():
    env = yaml.safe_load((PROJECT_ROOT / 'spack-env' / 'spack.yaml').read_text())['spack']
    specs = [s for d in env['definitions'] for k, v in d.items() if k == 'mpis' for s in v]
    specs += [f'{pkg} {conf["variants"]}' for pkg, conf in env['packages'].items()
              if 'variants' in conf]
    assert specs
    for spec in specs:
        for name, variant, values in _variants(spec):
            assert variant in VARIANTS[name], f'{spec}: {name} has no variant {variant!r}'
            if values and (name, variant) in VALUES:
                assert values <= VALUES[(name, variant)], f'{spec}: {variant}={values}'


def test_compilers_have_fortran_for_every_mpi():
    text = (PROJECT_ROOT / 'spack-env' / 'spack.yaml').read_text()
    compilers = yaml.safe_load(text)['spack']['definitions'][0]['compilers']
    # Debian's gcc-11 has no gfortran-11: MPIs (all need Fortran) cannot build with it.
    assert '%gcc@11' not in compilers and compilers
