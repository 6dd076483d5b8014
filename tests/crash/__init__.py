"""Crash consistency: a PySpark driver process is killed with SIGKILL at chosen points of an
index or cache operation, and a new process checks what it left behind.

- :mod:`tests.crash.scenarios`: the operations, how each is set up and what queries check;
- :mod:`tests.crash.points`: where to kill (the N-th mutating file-system call, a Spark write
  job in progress) and a seeded choice of those points;
- :mod:`tests.crash.tracer`: counts those calls and writes in a process, and kills it at one;
- :mod:`tests.crash.driver`: the process that is killed (``python -m tests.crash.driver``);
- :mod:`tests.crash.checks`: what must hold afterwards;
- :mod:`tests.crash.campaign`: counting runs, kills two at a time, checks (``python -m
  tests.crash --points 200`` runs many more points than the test suite does).
"""
