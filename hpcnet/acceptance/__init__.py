"""What judges sessions after the run.  It never imports discovery (hpcnet.stacks).

- references and baselines: the reference files and their validation
  (:mod:`.references`), baselines from repeated runs (:mod:`.baseline`, their
  tolerances :mod:`.spread`, put into a file :mod:`.refmerge`), which sessions
  are the accepted baseline (:mod:`.accepted`);
- comparison: `hpcnet compare` (:mod:`.compare`), one metric judged
  (:mod:`.metricjudge`) by the statistics of :mod:`.statcompare`, the values a
  case recorded (:mod:`.casevalues`), stored sessions (:mod:`.storedsessions`);
- history: `hpcnet history` (:mod:`.history`, :mod:`.history_index`,
  :mod:`.history_text`), levels and change points (:mod:`.levels`,
  :mod:`.binseg`, :mod:`.pooled_outliers`), the metrics index
  (:mod:`.metricindex`), accepted changes (:mod:`.accepted_changes`), the trend
  page (:mod:`.trend`);
- the report: the HTML page (:mod:`.report`, :mod:`.reportparts`), its plots
  and figures (:mod:`.reportplots`, :mod:`.figures`);
- the kernel-vs-IMB/OSU cross-check (:mod:`.crosscheck`).
"""
