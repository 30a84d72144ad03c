"""`python -m study ...`: see study/cli.py."""
import sys

from .cli import main

sys.exit(main())
