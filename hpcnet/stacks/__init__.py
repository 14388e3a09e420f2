"""Discovery: where the compiler x MPI environments come from.

Sources (:mod:`.sources`: Debian, PyPI, prefixes, Spack; :mod:`.modules`:
Lmod's modules, over :mod:`.lmod` and :mod:`.modulenames`) yield candidates
(:mod:`.candidate`, where the probe proves each one), and :mod:`.discover`
turns every working pair into a ReFrame environment.
:mod:`.spacklock` reads a Spack lock without Spack; :mod:`.modulecache`
keeps what the module source found until a modulefile changes.

Imports go one way: :mod:`.discover` imports the others, none of them
imports it or this package.  Callers use the names below
(``stacks.discover()``); judging (hpcnet.acceptance) never imports them.
"""
from hpcnet.stacks.candidate import TOOL_SUBDIRS, MpiCandidate, StackError, state_dir
from hpcnet.stacks.discover import (CACHE_FILE, Compiler, Discovery, Labelled, MpiStack,
                                    cached_discovery, detect_compilers, discover)
from hpcnet.stacks.offered import (LeftOut, chosen_environments, left_out, reframe_environments,
                                   site_environments)
from hpcnet.stacks.candidate import (kept_launcher, launcher_notice, missing_piece, probe_fabrics,
                                     probe_source)
from hpcnet.stacks.sources import (SPACK_ENV_VAR, SPACK_FORMAT, extra_prefix_candidates, prefix_candidate,
                                   pypi_root, spack_candidates)

__all__ = [
    'CACHE_FILE', 'cached_discovery', 'SPACK_ENV_VAR', 'SPACK_FORMAT', 'TOOL_SUBDIRS', 'Compiler',
    'Discovery', 'LeftOut', 'left_out', 'chosen_environments', 'Labelled', 'MpiCandidate', 'MpiStack', 'StackError', 'detect_compilers', 'discover',
    'extra_prefix_candidates', 'kept_launcher', 'launcher_notice', 'missing_piece', 'prefix_candidate', 'probe_fabrics', 'probe_source',
    'pypi_root', 'reframe_environments', 'site_environments', 'spack_candidates', 'state_dir',
]
