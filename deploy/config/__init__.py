"""Node config templates and the example cluster description, shipped as package data (read by ``cluster.py``).

A package rather than a plain folder, so that setuptools ships the templates without treating the folder as an
undeclared namespace package."""
