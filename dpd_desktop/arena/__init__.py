"""DPD Arena: named benchmark protocols (protocol.py) run through the sweep machinery (runner.py), judged
(judge.py, metrics.py) and ranked (leaderboard.py); ``dpd-desktop arena``. No Qt.
"""
