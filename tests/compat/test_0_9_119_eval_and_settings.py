"""0.9.119's eval baseline and its `lovia web` settings file (both JSON) read as they were written."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from lovia.eval.report import Report
from lovia.web.config.storage import load_config

from ._fixtures import FIXTURES, expected, needs_fixtures

pytestmark = needs_fixtures


def test_the_eval_baseline_loads_and_still_gates_a_new_report(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    shutil.copyfile(FIXTURES / "baseline.json", path)
    baseline = Report.load(path)
    assert [[c.name, c.passed, c.pass_rate] for c in baseline.cases] == expected()["eval"]["cases"]
    assert baseline.compare(baseline).regressions == []
    # a new run where the case that passed now fails is a regression against the old baseline
    greets = next(c for c in baseline.cases if c.name == "greets")
    failed = [  # a sample passes when its checks do: fail them
        dataclasses.replace(sample, checks=[dataclasses.replace(c, passed=False) for c in sample.checks])
        for sample in greets.samples
    ]
    worse = dataclasses.replace(baseline, cases=[dataclasses.replace(greets, samples=failed)])
    assert worse.compare(baseline).regressions == ["greets"]


def test_the_web_settings_file_loads_with_every_field() -> None:
    config = load_config(FIXTURES / "config.json")
    assert config is not None
    want = expected()["config"]
    (model,) = config.models
    (saved,) = want["models"]
    for name in ("id", "model", "flavor", "base_url", "api_key", "context_window", "vision", "extra_body"):
        assert getattr(model, name) == saved[name], name
    assert config.roles.chat == "main" and config.roles.vision is None and config.roles.aux is None
    assert config.search.backend == "auto"
    assert list(config.skills.dirs) == want["skills"]["dirs"]
