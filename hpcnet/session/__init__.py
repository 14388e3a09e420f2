"""A session: `hpcnet run` starting ReFrame on the checks (:mod:`.runner`),
ReFrame's console output passed on to a log (:mod:`.reframeoutput`), and the
session's verdict read from ReFrame's report (:mod:`.verdict`).

It imports the modules of hpcnet itself, the site's configuration
(hpcnet.siteconfig), discovery (hpcnet.stacks) and the acceptance wings; of
the packages above it, only the commands (hpcnet.commands, hpcnet.cli)
import it.
"""
