"""Long work on this host: what a long phase is doing, said on standard
error (:mod:`.progress`), and independent work spread over the host's cores
in forked processes (:mod:`.forked`), which hold the progress timer still
across each fork.

A leaf: it imports nothing of hpcnet, so discovery, judging and the commands
all use it.
"""
