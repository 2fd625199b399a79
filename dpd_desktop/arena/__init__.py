"""DPD Arena: named benchmark protocols run through the sweep machinery, judged and ranked (``dpd-desktop arena``).

* protocol.py: a protocol file (TOML, ``protocols/<name>.toml``): conditions, seeds, epochs, training settings,
  models, power gate, selection rule, reference rows.
* assets.py: OpenDPD 2.4.2's datasets and Arena v6 assets (``make arena-data`` unpacks them; integrity-checked).
* metrics.py: the Arena's test metrics (demodulated EVM, ACLR, NMSE, power error) on our metric functions.
* prepare.py: a condition's dataset and its frozen PA as a run of the workspace.
* judge.py: the test scores of a trained DPD: its cascade output against the common linear baseline.
* leaderboard.py: mean ± sd per model, parameters, MACs/sample, Pareto front; Markdown, HTML, CSV.
* runner.py: the whole protocol: prepare, one sweep per (condition, model), judge, leaderboard.

Core only: nothing here imports Qt.
"""
