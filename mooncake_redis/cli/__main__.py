"""``python -m mooncake_redis.cli``: the same program as ``mooncake-redis``."""

import sys

from . import main

sys.exit(main())
