"""The scheduler's jobs: warm-ups, advising, refresh, optimize, evict and vacuum, run by
APScheduler 3 on cron or interval schedules from one YAML file (:mod:`accelerator.scheduler.config`,
whose cron expressions mean what crontab means: :mod:`accelerator.scheduler.cron`)."""
