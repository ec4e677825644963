"""Fine-tuning evaluation: BERT-style heads on any HF encoder (and translation with any HF seq2seq model), one
training loop, cross-lingual scenarios.

- `spec`: TaskSpec / load_task_spec (configs/tasks/<name>.yaml)
- `tasks`: task types by name (classification, tagging, spans, qa, translation); `get_task(name)`
- `trainer`: finetune(..., on_step=...), predict(...)
- `task_data`: TaskData (a task's files per language, capped and split), check_source_data
- `scenarios`: which runs each scenario asks for, of a TaskRunner
- `runner`: TrainingRunner; run_task(...) -> one task entry of the results schema
- `run_store`: the finished-run records (RunStore), RecordReader, recorded_task_entry
- `summaries`: statistics over seeds and the task entry
- `resume_key`: what a fine-tuning run is computed from (the key its record and checkpoints are stored under)
"""

from metaxlm.finetune.spec import Hyperparameters, TaskSpec, load_task_spec

__all__ = ["Hyperparameters", "TaskSpec", "load_task_spec"]
