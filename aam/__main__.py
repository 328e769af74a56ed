import sys

from aam.cli import main

sys.exit(main())
