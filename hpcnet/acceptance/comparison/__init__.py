"""The comparison wing: `hpcnet compare` (the sides it reads: sides, stored
sessions read in-process: storedsessions; the comparison: compare; its text:
comparetext), one metric judged (metricjudge) by the statistics of
statcompare, and the kernel-vs-IMB/OSU cross-check (crosscheck).  It imports
the references wing only.
"""
