"""What runs inside the checks (checks/*.py): the ReFrame base classes
(:mod:`.testlib`, :mod:`.benchlib`), the rules a run is judged by while it
runs (:mod:`.sanity`, :mod:`.linkbytes`; the link counters are hpcnet.fabrics'), the
preflight probe, the socket checks' rules and the pair matrix's figures
(:mod:`.analysis`).  Imported by ReFrame when it loads the checks.
"""
