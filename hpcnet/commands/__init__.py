"""The hpcnet commands, one module each (hpcnet.cli assembles them).

A command module holds the argument parsing and the printing and exit-code
glue of its command, not the logic it calls:

- ``add_parser(sub)`` registers the subcommand on the subparsers of
  hpcnet.cli, with ``set_defaults(func=run)`` and, where they hold,
  ``takes_reframe_args=True`` (options hpcnet does not know go to ReFrame:
  ``args.reframe_args``) and ``needs_work_dir=False`` (it writes nothing in
  the work directory, HPCNET_WORK_DIR, so it runs wherever the user is);
- ``run(args)`` returns the exit code (hpcnet.exitcodes); a user's error is
  raised as hpcnet.runner.SelectionError (or another error hpcnet.cli maps
  to one line and exit 2).
"""
