"""What judges sessions after the run, in four wings, each a package with one
job; a wing imports only the wings before it (tests/test_layers.py):

1. references: the reference files, baselines and what the site accepted;
2. comparison: `hpcnet compare`, its statistics, the kernel cross-check;
3. report: the HTML page and its plots and figures;
4. history: `hpcnet history`, change points, the metrics index, the trend
   page (drawn with the report's pieces).

No wing imports discovery (hpcnet.stacks).
"""
