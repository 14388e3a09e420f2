"""The hpcnet commands, one module each (hpcnet.cli assembles them).

A command module holds its command's argument parsing, the sessions it
runs (hpcnet.session.runner) and its printing and exit code; what judges, discovers
or probes lives in the packages below, which never import a command:

- ``add_parser(sub)`` registers the subcommand on the subparsers of
  hpcnet.cli, with ``set_defaults(func=<its run function>)`` and, where
  they hold, ``takes_reframe_args=True`` (options hpcnet does not know go to
  ReFrame: ``args.reframe_args``) and ``needs_work_dir=False`` (it writes
  nothing in the work directory, HPCNET_WORK_DIR, so it runs wherever the
  user is);
- ``run(args)`` (``run_init`` and ``run_check`` for `site init|check`)
  returns the exit code (hpcnet.exitcodes); a user's error is raised as
  hpcnet.session.runner.SelectionError, or another error hpcnet.cli prints as one
  line with exit 2.
"""
