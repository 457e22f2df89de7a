"""Builds the optional C extensions: the record walker (moldau._records) and the Avro validity test of broker-side
schema validation (moldau._avrocheck); everything else is configured in pyproject.toml.

`optional=True`: on a machine without a C compiler the install still succeeds and Moldau uses the same walk
in pure Python (moldau.protocol.record_validation logs a warning at start-up), and schema validation decodes every
Avro record in full.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c99", "-Wall"]
setup(ext_modules=[Extension("moldau._records", ["moldau/_records.c"], optional=True, extra_compile_args=_FLAGS),
                   Extension("moldau._avrocheck", ["moldau/_avrocheck.c"], optional=True, extra_compile_args=_FLAGS)])
