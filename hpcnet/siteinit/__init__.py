"""`hpcnet site init` and `hpcnet site check`: a site file written from what
Slurm and the nodes say (:mod:`.slurm`, :mod:`.nodes`, :mod:`.proposal`),
and the checks a site passes before its first run (:mod:`.check`).  The
commands themselves are in :mod:`.cli`."""
