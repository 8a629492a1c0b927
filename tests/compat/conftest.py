"""Makes tests/compat importable (kafka_py, check_log) for pytest."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
