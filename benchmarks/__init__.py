"""ownmem benchmarks: ownmem measured side by side with the reference, in one run.

    python3 build.py bench [AREA]  ->  .venv/bin/python -m benchmarks [AREA]
                                   ->  docs/benchmarks.md  (+ a summary on stdout)

Every figure compares ownmem with the reference implementation (``apertomemory``,
import name ``amem``) measured in the same process, on the same machine, in the
same run, with interleaved repetitions, so a slow machine moves both sides alike
and the ratio is what a target judges.  The run exits non-zero when any target
fails, after writing the document, so a regression is visible in CI and on disk.

Modules: ``timing`` (clock, medians), ``corpus`` (the memories both sides seal),
``machine`` (what the figures were measured on), ``report`` (results and the
Markdown), ``fuzz`` (the robustness run), ``core`` (the format and vault area).
"""
