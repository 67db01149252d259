#!/usr/bin/env bash
# Regenerate every picture in docs/img/ from the real page in headless Chromium (offline).
#
#   bash scripts/screenshots.sh
#
# The light/dark desktop and 390 px views come from scripts/web_screenshots.py; each feature's
# picture is taken by its browser test, which writes into docs/img/ when LOVIA_UPDATE_SCREENSHOTS=1
# (otherwise into a scratch folder, so an ordinary test run leaves the tree clean).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-.venv/bin/python}"
"$py" scripts/web_screenshots.py
LOVIA_UPDATE_SCREENSHOTS=1 "$py" -m pytest -q -p no:cacheprovider -m browser tests/web
git status --short docs/img
