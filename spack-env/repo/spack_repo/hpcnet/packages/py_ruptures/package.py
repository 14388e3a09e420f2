# ruptures, the change-point search `hpcnet history` uses (pyproject.toml: ruptures>=1.1.9).
# Not among Spack's builtin packages; the build and run dependencies are those of its
# pyproject.toml [build-system] and setup.cfg install_requires (python_requires >=3.9, <3.14).
from spack_repo.builtin.build_systems.python import PythonPackage

from spack.package import *


class PyRuptures(PythonPackage):
    """Change point detection for signals in Python."""

    homepage = "https://github.com/deepcharles/ruptures"
    pypi = "ruptures/ruptures-1.1.10.tar.gz"

    license("BSD-2-Clause")

    version("1.1.10", sha256="76b998f10709045e91a5f44173dc574bf98a106fd3bf22ec3c63b298a02df031")

    depends_on("c", type="build")
    depends_on("python@3.9:3.13", type=("build", "run"))
    depends_on("py-setuptools@42:", type="build")
    depends_on("py-wheel", type="build")
    depends_on("py-cython@0.28.5:", type="build")
    depends_on("py-setuptools-scm@3.4:", type="build")
    depends_on("py-numpy", type=("build", "run"))
    depends_on("py-scipy@0.19.1:", type=("build", "run"))
