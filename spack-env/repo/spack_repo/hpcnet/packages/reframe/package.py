# ReFrame 4.10, which hpcnet needs (pyproject.toml: reframe-hpc>=4.10,<4.11).  The builtin
# packages stop at 4.7.3 in v2025.11.0 (what Spack 1.1.0 pins) and at 4.9.3 in v2026.06.0;
# 4.10.0 is spack/spack-packages pull request #5062, whose checksum this reuses.  Remove
# this file once the builtin recipe has 4.10.
from spack_repo.builtin.packages.reframe.package import Reframe as BuiltinReframe

from spack.package import *


class Reframe(BuiltinReframe):
    """ReFrame, with 4.10.0 and the dependencies it added (reframe-hpc 4.10 Requires-Dist)."""

    version("4.10.0", sha256="3fddf2ab8642a11d35d878ecf07a8912ee4d21f4ab37db8e53ca6c130b1819de")

    # 4.10 needs Python 3.10 and imports these four more; without polars it refuses its
    # results-storage queries (--describe-stored-sessions, which `hpcnet compare` runs).
    # Its pins (clustershell~=1.9, jsonschema~=4.26, ...) are newer than some builtin
    # versions; nothing enforces them here (Spack installs ReFrame's tree, not with pip).
    depends_on("python@3.10:", when="@4.10:", type="run")
    depends_on("py-clustershell", when="@4.10:", type="run")
    depends_on("py-fasteners", when="@4.10:", type="run")
    depends_on("py-jinja2", when="@4.10:", type="run")
    depends_on("py-polars", when="@4.10:", type="run")
