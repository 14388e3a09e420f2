"""A site's configuration: its site files loaded and the one a session runs
on chosen (:mod:`.sites`), the system ReFrame's options name
(:mod:`.reframeargs`), the ReFrame configuration built from them
(:mod:`.reframeconfig`, the one call of config/settings.py), and
`hpcnet config`'s account of what is in force (:mod:`.showconfig`).

Writing a site file (`hpcnet site init`, `site check`) is hpcnet.siteinit's.
It imports the modules of hpcnet itself, discovery (hpcnet.stacks) and the
references wing of hpcnet.acceptance; never a session (hpcnet.session) or a
command.
"""
