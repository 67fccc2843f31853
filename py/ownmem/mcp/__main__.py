"""`python -m ownmem.mcp`: the same server as `ownmem mcp`, without loading the CLI."""
import sys

from ownmem.mcp.server import main

sys.exit(main())
