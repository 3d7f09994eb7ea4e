"""Imported first by the fork server that starts ParallelRunner's workers (``settings.py``).

A worker registers the hooks of Kedro's ``settings`` and leaves out the plugins' hooks they disable.
A child of a fresh fork server had Kedro's default settings: the project's hooks did not run in
the workers, and kedro-mlflow's did, writing an MLflow store into the project with tracking off.
(Kedro bootstraps the project in a worker only where it knows the package name and the worker's
global start method reads spawn or forkserver, and that bootstrap then recursed without end in its
logging configuration.) The server loads the project's settings here, and its children are forks
of it: they have the settings, and the modules they import, as a forked worker would.
"""

from kedro.framework.project import settings

settings.configure("bert_mlm.settings")
