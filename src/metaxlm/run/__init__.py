"""What a run keeps besides its models: the run directory's layout (`layout`: every file name of a run), its
provenance and the machine (`info`), the whole-run clock (`clock`), what each stage's outputs were made from
(`stamps`) and the processes of a launch (`processes`). Foundations every layer may use; the stages themselves are
`metaxlm.pipeline`, on top of all. Importing this package imports none of them."""
