"""The one vocabulary of a run's state, for the core, the command line and the window.

``queued`` → ``running`` → ``succeeded`` / ``failed`` / ``cancelled`` / ``interrupted`` (the process that ran it is
gone). A reader that cannot parse a run's status reports ``unreadable``, and one whose status names a selected
checkpoint that is missing or not a checkpoint file reports ``damaged``; those are properties of the folder, not
states a run is put in.
"""
RUN_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")
LIVE_STATES = ("queued", "running")
FINAL_STATES = ("succeeded", "failed", "cancelled", "interrupted")
UNREADABLE = "unreadable"
DAMAGED = "damaged"
