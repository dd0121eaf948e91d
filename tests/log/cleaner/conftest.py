import sys
from pathlib import Path

# The crash test reuses the pass tests' log helpers; importlib mode does not add this folder itself.
sys.path.insert(0, str(Path(__file__).parent))
