"""The optional native record codec; everything else is configured in pyproject.toml.

``optional=True``: where the extension cannot be built (no C compiler), the install still succeeds and the
pure-Python reference codec runs (client/record/codec.py says which one does).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "odradek.client.record._native",
            sources=["client/record/_native.c"],
            optional=True,
        )
    ]
)
