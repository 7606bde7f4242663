"""The ``irforge`` and ``irviz`` commands.

Errors a user can cause (bad files, invalid models) print one ``irforge: error:`` line and exit
with status 1; internal tracebacks are for bugs only.  ``main`` holds the commands on models and
passes, ``run`` emitting and running on backends, ``importing`` the frontends' ``irforge import``.
"""

from .main import irforge_main, irviz_main

__all__ = ["irforge_main", "irviz_main"]
