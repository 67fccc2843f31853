"""`python -m ownmem.cli`: the `ownmem` command."""
import sys

from ownmem.cli import main

sys.exit(main())
