"""What every part runs on: the accelerator's Spark settings, the supported Spark versions, the
JVM bridge (the Java rule compiled from ``java/`` at first use) and the executors' Python."""
