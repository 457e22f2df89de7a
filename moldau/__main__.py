"""`python -m moldau`: the command line (`moldau.cli.main`)."""

import sys

# kio registers Hypothesis strategies for its types whenever Hypothesis can be imported, and importing it (pytest
# and trio come with it) adds a quarter of a second to the start of every process where it is installed, as in
# the test environment. No command uses those strategies; a None entry makes the import fail fast.
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from moldau.cli.main import main  # noqa: E402  (after the entry above)

raise SystemExit(main())
