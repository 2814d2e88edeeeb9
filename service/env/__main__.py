"""``python -m service.env write|check FOLDER``: regenerate or verify ``seed_data/``."""

import sys

from service.env.dataset import main

raise SystemExit(main(sys.argv[1:]))
