"""The references wing: the reference files and their validation
(references), baselines from repeated runs (baseline, their tolerances
spread, the values a case recorded casevalues, merged into a file refmerge),
which sessions are the accepted baseline (accepted) and which changes the
site accepted (accepted_changes).  The first wing: it imports no other, and
it is the only wing the checks' layer imports.
"""
