"""For `python3 setup.py build` / `install` where pip is absent; pyproject.toml holds the
metadata (setuptools >= 61 reads it)."""
from setuptools import setup

setup()
