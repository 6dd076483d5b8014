"""The ``accelerator`` command: the command line, its spec files, the scheduler's service
commands and the demo."""
