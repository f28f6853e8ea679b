"""`python -m drover.templates --record-history`, kept for old habits; see history.py."""
import sys

from .history import main

sys.exit(main())
