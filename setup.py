"""Builds the optional C record walker (moldau._records); everything else is configured in pyproject.toml.

`optional=True`: on a machine without a C compiler the install still succeeds and Moldau uses the same walk
in pure Python (moldau.protocol.record_validation logs a warning at start-up).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("moldau._records", ["moldau/_records.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c99", "-Wall"])])
