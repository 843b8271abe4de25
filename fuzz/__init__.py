"""Coverage-guided fuzzing (atheris, libFuzzer) of the loader, the admission handler, the core and
the quantity parser. `python -m fuzz --help`; `make fuzz FUZZ_SECONDS=...`."""
