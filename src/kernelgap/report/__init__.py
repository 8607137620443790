"""The report kit: what every experiment's report part writes and draws with, from result
files alone.  It sits below the experiments and knows none of them (their assembler is
:mod:`kernelgap.reproduction`); nothing here imports torch, so a report rebuilds anywhere.
"""
