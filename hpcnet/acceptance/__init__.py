"""What judges sessions after the run: references and their metric names
(:mod:`.references`, :mod:`.metrics`), baselines (:mod:`.baseline`), the
before/after comparison and its statistics (:mod:`.compare`,
:mod:`.statcompare`), `hpcnet accept` (:mod:`.accept`), the HTML report
(:mod:`.report`) and the kernel-vs-IMB/OSU cross-check
(:mod:`.crosscheck`).  It never imports discovery (hpcnet.stacks).
"""
