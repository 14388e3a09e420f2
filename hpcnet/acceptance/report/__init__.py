"""The report wing: the HTML page of a run (report, its parts reportparts),
its plots (reportplots) and the figures they are drawn with (figures).  It
imports the references and comparison wings only.
"""
