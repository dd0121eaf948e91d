import sys
from pathlib import Path

# The compatibility matrices import their shared helpers (matrix.py) by name; importlib mode does not add this
# folder itself.
sys.path.insert(0, str(Path(__file__).parent))
