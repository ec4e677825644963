"""run_info.json keeps every invocation of a run: a resumed run's time is the sum of its parts, not its last one."""

import json
import multiprocessing
from datetime import UTC, datetime, timedelta

from metaxlm.config import RunConfig
from metaxlm.run import info as run_info


def _cfg(out):
    return RunConfig.model_validate({"output_dir": str(out), "data": {"languages": ["en"]}})


def _read(out):
    return json.loads((out / "run_info.json").read_text())


def test_an_interrupted_then_resumed_run_records_both_invocations(tmp_path):
    out = tmp_path / "run"
    run_info.write_run_info(out, _cfg(out), argv=["metaxlm", "run", "a.yaml"])
    run_info.record_stage_seconds(out, {"vocab": 2.0, "prepare": 30.0})  # then killed inside pretrain
    first = _read(out)
    assert first["run_invocations"] == 1 and first["run_interrupted_invocations"] == 1
    assert first["run_seconds"] == 32.0 and "wall_seconds" not in first
    # it began an hour ago (the test runs in one second)
    first["invocations"][0]["started"] = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    (out / "run_info.json").write_text(json.dumps(first))

    run_info.write_run_info(out, _cfg(out), argv=["metaxlm", "run", "a.yaml"])  # the resume
    run_info.finish_run_info(out, {"vocab": 0.0, "prepare": 0.0, "pretrain": 100.0})
    info = _read(out)
    done, resumed = info["invocations"]
    assert done["finished"] is None and done["stage_seconds"] == {"vocab": 2.0, "prepare": 30.0}
    assert resumed["finished"] and resumed["wall_seconds"] == 100.0
    # the top level is the last invocation; the run's own fields cover both
    assert info["wall_seconds"] == 100.0 and info["stage_seconds"]["pretrain"] == 100.0
    assert info["run_invocations"] == 2 and info["run_interrupted_invocations"] == 1
    assert info["run_seconds"] == 132.0  # the second started after the first's recorded 32 s


def test_side_by_side_invocations_count_their_overlap_once():
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    s = timedelta(seconds=1)
    spans = [(t0, t0 + 100 * s), (t0 + 50 * s, t0 + 120 * s), (t0 + 10 * s, t0 + 20 * s), (t0 + 200 * s, t0 + 210 * s)]
    assert run_info._union_seconds(spans) == 130.0
    assert run_info._union_seconds([]) == 0.0
    assert run_info._union_seconds([(t0, t0)]) == 0.0


def _one_process(out, argv, seconds):
    run_info.write_run_info(out, _cfg(out), argv=argv)
    run_info.finish_run_info(out, {"evaluate": seconds})


def test_processes_side_by_side_each_keep_their_record(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_one_process, args=(out, ["metaxlm", "run", f"evaluate.variants=[v{i}]"], 10.0 + i))
             for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    invocations = _read(out)["invocations"]
    assert sorted(inv["argv"][-1] for inv in invocations) == [f"evaluate.variants=[v{i}]" for i in range(4)]
    assert all(inv["finished"] for inv in invocations)


def test_a_run_info_written_before_invocations_were_kept_becomes_the_first(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run_info.json").write_text(json.dumps({
        "started": "2026-11-20T10:00:00+00:00", "argv": ["metaxlm", "run", "old.yaml"], "finished": "x",
        "stage_seconds": {"evaluate": 60.0}, "wall_seconds": 60.0, "versions": {}}))
    run_info.write_run_info(out, _cfg(out), argv=["metaxlm", "run", "old.yaml"])
    run_info.finish_run_info(out, {"report": 1.0})
    old, new = _read(out)["invocations"]
    assert old["argv"][-1] == "old.yaml" and old["wall_seconds"] == 60.0 and new["wall_seconds"] == 1.0
    assert _read(out)["run_seconds"] >= 61.0


def test_an_interrupted_invocation_counts_the_stage_it_was_in(tmp_path):
    out = tmp_path / "run"
    run_info.write_run_info(out, _cfg(out), argv=["metaxlm", "run", "a.yaml"])
    run_info.record_stage_seconds(out, {"vocab": 2.0}, unfinished=("pretrain", 3600.0))  # after a variant, killed
    info = _read(out)
    assert info["invocations"][0]["unfinished_stage"]["stage"] == "pretrain"
    assert info["run_seconds"] == 3602.0 and info["run_interrupted_invocations"] == 1
    run_info.record_stage_seconds(out, {"vocab": 2.0, "pretrain": 4000.0})  # the stage finished after all
    assert "unfinished_stage" not in _read(out)["invocations"][0] and _read(out)["run_seconds"] == 4002.0


def test_a_run_records_the_time_of_the_stage_it_stops_in(tmp_path, monkeypatch):
    """`metaxlm run` records its time so far after each pretrained variant (what a SIGKILL leaves) and at the moment
    an error or Ctrl-C stops it, so a resumed run's `run_seconds` counts the interrupted invocation's work."""
    import time

    from metaxlm import pipeline

    out = tmp_path / "run"
    cfg = RunConfig.model_validate({"output_dir": str(out), "data": {"languages": ["en"]},
                                    "stages": ["vocab", "pretrain"]})
    seen = {}

    def pretrain(cfg, progress, events):
        from metaxlm.run.clock import VariantPretrained

        time.sleep(0.3)
        events.emit(VariantPretrained("a", 1, 0.3))  # a variant done: what a kill from here on would leave
        seen["after_variant"] = _read(out)["invocations"][-1]["unfinished_stage"]
        time.sleep(0.3)
        raise KeyboardInterrupt

    monkeypatch.setitem(pipeline.STAGES, "vocab", lambda cfg, progress: None)
    monkeypatch.setitem(pipeline.STAGES, "pretrain", pretrain)
    monkeypatch.setattr(pipeline, "_steps_done", lambda cfg, name: 0)
    try:
        pipeline.run(cfg, progress=False)
    except KeyboardInterrupt:
        pass
    assert seen["after_variant"]["stage"] == "pretrain" and seen["after_variant"]["seconds"] >= 0.3
    stopped = _read(out)["invocations"][-1]
    assert stopped["finished"] is None and set(stopped["stage_seconds"]) == {"vocab"}
    assert stopped["unfinished_stage"]["stage"] == "pretrain" and stopped["unfinished_stage"]["seconds"] >= 0.6
    assert _read(out)["run_seconds"] >= 0.6


def test_a_single_stage_command_records_its_time_when_stopped(tmp_path):
    out = tmp_path / "run"
    try:
        with run_info.recorded_invocation(out, _cfg(out), "evaluate"):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    stopped = _read(out)["invocations"][-1]
    assert stopped["finished"] is None and stopped["unfinished_stage"]["stage"] == "evaluate"
    with run_info.recorded_invocation(out, _cfg(out), "evaluate"):
        pass
    assert _read(out)["run_invocations"] == 2 and _read(out)["invocations"][-1]["finished"]


def _stages_stuck_in_pretraining(record_every: float, inside=None):
    """In a forked child: vocab does nothing, pretrain stays inside a variant (touching `inside` once there)."""
    import time

    from metaxlm import pipeline

    def pretrain(cfg, progress, events):
        if inside is not None:
            inside.touch()
        time.sleep(600)

    pipeline.STAGES.update(vocab=lambda cfg, progress: None, pretrain=pretrain)
    pipeline._steps_done = lambda cfg, name: 0
    run_info.RECORD_EVERY_SECONDS = record_every


def _run_until_killed(cfg):
    from metaxlm import pipeline

    _stages_stuck_in_pretraining(record_every=0.1)
    pipeline.run(cfg, progress=False)


def test_a_killed_run_keeps_its_time_up_to_its_last_periodic_record(tmp_path):
    """SIGKILL (a session's end, a lost machine) gives no chance to write: the run records its time so far every
    RECORD_EVERY_SECONDS while a stage runs, so the killed invocation still counts what it did up to then."""
    import os
    import signal
    import time

    out = tmp_path / "run"
    cfg = RunConfig.model_validate({"output_dir": str(out), "data": {"languages": ["en"]},
                                    "stages": ["vocab", "pretrain"]})
    child = multiprocessing.get_context("fork").Process(target=_run_until_killed, args=(cfg,))
    began = time.monotonic()
    child.start()
    deadline, seen = began + 60, 0.0
    while time.monotonic() < deadline:  # until the record shows a second inside pretraining
        try:
            seen = _read(out)["invocations"][-1].get("unfinished_stage", {}).get("seconds", 0.0)
        except (OSError, ValueError, KeyError, IndexError):
            seen = 0.0
        if seen >= 1.0:
            break
        time.sleep(0.05)
    time.sleep(1.0)  # ten more periodic records
    os.kill(child.pid, signal.SIGKILL)
    lived = time.monotonic() - began
    child.join()
    assert child.exitcode == -signal.SIGKILL
    killed = _read(out)
    record = killed["invocations"][-1]
    assert record["finished"] is None and record["unfinished_stage"]["stage"] == "pretrain"
    assert set(record["stage_seconds"]) == {"vocab"}
    # the second after the record seen is counted but for its last interval (0.1 s; 0.5 s for a loaded machine),
    # and never more than the process lived
    assert seen >= 1.0 and seen + 0.5 <= killed["run_seconds"] <= lived + 0.5


def test_the_periodic_record_stops_with_its_block_and_survives_a_failing_write():
    import time

    calls = []

    def record():
        calls.append(time.monotonic())
        raise OSError("disk full")

    with run_info.recorded_every(record, seconds=0.05):
        time.sleep(0.3)
    n = len(calls)
    assert n >= 3  # kept calling after the first write failed
    time.sleep(0.2)
    assert len(calls) == n  # and stopped with the block


def _run_command_until_terminated(config_path, inside):
    import sys

    from metaxlm import cli

    # no periodic record: what is there comes from the stop itself; the parent terminates the run once inside
    _stages_stuck_in_pretraining(record_every=3600.0, inside=inside)
    sys.exit(cli.main(["run", str(config_path), "--no-progress"]))


def test_sigterm_ends_a_run_like_ctrl_c_and_records_the_time_up_to_the_stop(tmp_path):
    """A scheduler's time limit, `kill` or `docker stop` sends SIGTERM: `metaxlm run` records the stage it was in up
    to that moment and exits 143 with a message, instead of dying with its last minute unrecorded."""
    import os
    import signal
    import time

    out = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(f"output_dir: {out}\ndata: {{languages: [en]}}\nstages: [vocab, pretrain]\n")
    inside = tmp_path / "inside-pretrain"
    child = multiprocessing.get_context("fork").Process(target=_run_command_until_terminated, args=(config, inside))
    began = time.monotonic()
    child.start()
    deadline = began + 60
    while time.monotonic() < deadline and not inside.exists():
        time.sleep(0.05)
    time.sleep(1.0)
    os.kill(child.pid, signal.SIGTERM)
    lived = time.monotonic() - began
    child.join(30)
    assert child.exitcode == 143
    record = _read(out)["invocations"][-1]
    assert record["finished"] is None and record["unfinished_stage"]["stage"] == "pretrain"
    assert 1.0 <= record["unfinished_stage"]["seconds"] <= lived


def test_run_time_sums_every_invocation_for_the_report(tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert run_info.run_time(out) is None  # no record: nothing to say
    run_info.write_run_info(out, _cfg(out), argv=["metaxlm", "run", "a.yaml"])
    run_info.record_stage_seconds(out, {"vocab": 2.0}, unfinished=("pretrain", 3600.0))  # killed inside pretrain
    first = _read(out)
    first["invocations"][0]["started"] = (datetime.now(UTC) - timedelta(hours=3)).isoformat(timespec="seconds")
    first["invocations"][0]["cpu"] = {"model": "Intel Xeon (family 6, model 143)", "cores": 2}
    first["invocations"][0]["git"] = {"commit": "a" * 40, "dirty": True}
    (out / "run_info.json").write_text(json.dumps(first))

    run_info.write_run_info(out, _cfg(out), argv=["metaxlm", "run", "a.yaml"])  # the resume, still running
    run_info.record_stage_seconds(out, {"vocab": 0.0, "pretrain": 400.0}, unfinished=("evaluate", 60.0))
    took = run_info.run_time(out)
    assert took.invocations == 2 and took.stopped == 1 and took.running
    assert took.stage_seconds == {"vocab": 2.0, "pretrain": 4000.0, "evaluate": 60.0}
    assert took.seconds == 3602.0 + 460.0
    assert took.cpus[0] == "Intel Xeon (family 6, model 143) (2 cores)" and len(took.cpus) == 2
    assert took.commits[0] == "aaaaaaa dirty"

    run_info.finish_run_info(out, {"vocab": 0.0, "pretrain": 400.0, "evaluate": 70.0})
    done = run_info.run_time(out)
    assert not done.running and done.stopped == 1 and done.stage_seconds["evaluate"] == 70.0
    monkeypatch.setattr(run_info, "_CURRENT", {})  # read by another process (`metaxlm report`): the same
    assert run_info.run_time(out) == done
    (out / "run_info.json").write_text("{not json")
    assert run_info.run_time(out) is None
