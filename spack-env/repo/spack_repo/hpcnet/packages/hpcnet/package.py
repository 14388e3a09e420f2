# hpcnet as a Spack package.  Installing it: README.md, "Installing hpcnet with
# Spack or EasyBuild".  tests/test_packaging.py keeps the version and the
# dependencies equal to pyproject.toml.
import os

from spack_repo.builtin.build_systems.python import PythonPackage

from spack.package import *

#: The suite's read-only data: installed as <prefix>/share/hpcnet/<dir>, found
#: through HPCNET_HOME (hpcnet/paths.py).
DATA_DIRS = ("checks", "config", "reference", "src")


def _left_by_runs(path: str) -> bool:
    """What builds and runs leave in a checkout (git-ignored): never installed."""
    parts = path.split(os.sep)
    return "__pycache__" in parts or parts[0] == "bin" or path.endswith(".o")


class Hpcnet(PythonPackage):
    """ReFrame-based acceptance suite for cluster networks and MPI stacks."""

    # hpcnet has no release tarball or public repository to fetch from: Spack
    # builds it from a checkout (`spack develop`, README.md), which needs no url.
    version("0.1.0")

    depends_on("python@3.10:", type=("build", "run"))
    depends_on("py-setuptools@64:", type="build")
    # Spack's `reframe` is a plain Package (its tree on PYTHONPATH, bin/reframe on PATH);
    # 4.10 comes from this repository's reframe recipe until the builtin one has it.
    depends_on("reframe@4.10", type=("build", "run"))
    depends_on("py-pyyaml@6:", type=("build", "run"))
    depends_on("py-matplotlib@3.6:", type=("build", "run"))
    depends_on("py-scipy@1.15:", type=("build", "run"))
    # From this repository's py-ruptures recipe (Spack's builtin packages have none).
    depends_on("py-ruptures@1.1.9:", type=("build", "run"))

    @run_after("install")
    def install_data(self):
        for name in DATA_DIRS:
            install_tree(join_path(self.stage.source_path, name),
                         join_path(self.prefix.share.hpcnet, name), ignore=_left_by_runs)

    def setup_run_environment(self, env: EnvironmentModifications) -> None:
        env.set("HPCNET_HOME", self.prefix.share.hpcnet)
