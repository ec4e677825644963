"""A run of the pipeline: the stages in order (`pipeline`), the run directory's layout (`layout`), its provenance
(`info`), the whole-run clock (`clock`), what each stage's outputs were made from (`stamps`) and the processes of a
launch (`processes`). Importing this package imports none of them: `layout`, `stamps` and `processes` are
foundations every layer may use, `pipeline` sits on top of all."""
