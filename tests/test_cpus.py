"""The CPUs this process may use, and the threads torch's pool gets from them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bert_mlm.cpus import OMP_ENV, cgroup_cpu_quota, intra_op_threads, usable_cpus


def cgroup_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cgroup_v2_quota_is_read_from_the_process_cgroup_and_its_parents(tmp_path):
    cgroup_tree(tmp_path, {"cpu.max": "max 100000\n", "job/cpu.max": "250000 100000\n",
                           "job/step/cpu.max": "max 100000\n"})
    membership = tmp_path / "cgroup"
    membership.write_text("0::/job/step\n")
    assert cgroup_cpu_quota(tmp_path, membership) == pytest.approx(2.5)  # the parent's limit binds
    membership.write_text("0::/\n")
    assert cgroup_cpu_quota(tmp_path, membership) is None  # "max": no quota


def test_a_cgroup_v1_quota_is_read_and_minus_one_means_none(tmp_path):
    cgroup_tree(tmp_path, {"cpu,cpuacct/docker/cpu.cfs_quota_us": "150000\n",
                           "cpu,cpuacct/docker/cpu.cfs_period_us": "100000\n",
                           "cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"})
    membership = tmp_path / "cgroup"
    membership.write_text("4:memory:/docker\n3:cpu,cpuacct:/docker\n")
    assert cgroup_cpu_quota(tmp_path, membership) == pytest.approx(1.5)
    membership.write_text("3:cpu,cpuacct:/\n")
    assert cgroup_cpu_quota(tmp_path, membership) is None
    assert cgroup_cpu_quota(tmp_path, tmp_path / "missing") is None  # not Linux


def test_usable_cpus_follow_the_affinity_mask_and_round_a_quota_down(monkeypatch):
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no affinity masks on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr("bert_mlm.cpus.cgroup_cpu_quota", lambda: None)
    assert usable_cpus() == 4
    monkeypatch.setattr("bert_mlm.cpus.cgroup_cpu_quota", lambda: 1.5)  # docker --cpus=1.5
    assert usable_cpus() == 1
    monkeypatch.setattr("bert_mlm.cpus.cgroup_cpu_quota", lambda: 0.5)
    assert usable_cpus() == 1


def test_this_process_is_counted_as_the_os_sees_it():
    if hasattr(os, "sched_getaffinity"):
        assert usable_cpus() <= len(os.sched_getaffinity(0))
    assert usable_cpus() >= 1


def test_threads_come_from_the_setting_then_omp_num_threads_then_the_usable_cpus(monkeypatch):
    monkeypatch.setattr("bert_mlm.cpus.usable_cpus", lambda: 8)
    assert intra_op_threads(3) == (3, "training.threads")
    monkeypatch.setenv(OMP_ENV, "2")
    assert intra_op_threads("auto") == (2, OMP_ENV)
    monkeypatch.setenv(OMP_ENV, "not a number")
    assert intra_op_threads("auto") == (8, "8 usable CPU(s)")
    monkeypatch.delenv(OMP_ENV)
    assert intra_op_threads("auto", processes=4) == (2, "8 usable CPU(s) / 4 processes")
    assert intra_op_threads("auto", processes=16)[0] == 1


def test_openmp_waits_passively_unless_the_user_chose_or_torch_is_already_loaded(monkeypatch):
    import sys

    from bert_mlm.cpus import WAIT_ENV, wait_passively

    monkeypatch.delenv(WAIT_ENV, raising=False)
    wait_passively()  # torch is loaded in this process: its OpenMP has read its settings already
    assert WAIT_ENV not in os.environ
    monkeypatch.delitem(sys.modules, "torch")  # as at `import bert_mlm`, before anything loads torch
    wait_passively()
    assert os.environ[WAIT_ENV] == "PASSIVE"
    monkeypatch.setenv(WAIT_ENV, "ACTIVE")  # the user's choice stays
    wait_passively()
    assert os.environ[WAIT_ENV] == "ACTIVE"
