"""The sweep command's Ray options (``--ray ADDRESS|local`` and the rest) and their constants, apart from the Ray
backend (sweep/ray_executor.py re-exports them): ``dpd-desktop sweep --help`` imports only argparse for them
(the Ray backend's imports: benchmarks/results/2026-12-04-notes-core.md).
"""
from __future__ import annotations

#: ``--ray local``: start a cluster on this machine (ray_security.py ``LocalCluster``) for the sweep
LOCAL_ADDRESS = "local"
DEFAULT_TRIALS_PER_GPU = 4
#: the user's explicit override of the token-authentication rule (ray_security.py)
OVERRIDE_FLAG = "--ray-allow-unauthenticated"


def add_ray_arguments(parser) -> None:
    """The sweep command's Ray options: ``--ray ADDRESS``, ``--ray-allow-unauthenticated``, ``--ray-trials-per-gpu``,
    ``--ray-num-cpus``."""
    parser.add_argument("--ray", metavar="ADDRESS", default=None,
                        help="run the trials on a Ray cluster: host:port or ray://host:port (token authentication "
                             "required: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH), or 'local' "
                             "(a cluster started on this machine, loopback dashboard, token authentication); needs "
                             "the extra dpd-desktop[cluster]. sweep resume: default the address sweep.json "
                             "recorded; 'none' runs it on this machine")
    parser.add_argument(OVERRIDE_FLAG, dest="ray_allow_unauthenticated", action="store_true",
                        help="connect to a remote Ray cluster without token authentication: anyone who reaches it "
                             "can run code there and send code back; only on a network you trust")
    parser.add_argument("--ray-trials-per-gpu", type=int, default=DEFAULT_TRIALS_PER_GPU, metavar="N",
                        help=f"trials sharing one GPU on the cluster (GPU fraction 1/N; default "
                             f"{DEFAULT_TRIALS_PER_GPU})")
    parser.add_argument("--ray-num-cpus", type=int, default=None, metavar="N",
                        help="CPUs of a 'local' cluster (default: the machine's)")
