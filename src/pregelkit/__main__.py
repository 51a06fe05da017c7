"""``python -m pregelkit``: the same command line as ``pregelkit``."""

from pregelkit.cli import main

raise SystemExit(main())
