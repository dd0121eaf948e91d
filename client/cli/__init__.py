"""The odradek command-line interface."""
