"""ASA's analysis scripts: small readers of the lab's raw output (tracefs traces, asa-gru-compare's
thread samples and schedstat snapshots, runs.json files, live calibration folders, bpftool
program stats) that print the tables behind the findings in results/<date>-<question>/.

Every module runs as `python -m asa_analysis.MODULE ARGS` from lab/analysis (or with
PYTHONPATH=lab/analysis) and has a `main(argv=None)`; its parsing is in pure functions that
take text or records and return data, and `main` prints. Standard library only.
"""

MODULES = (
    'anchor_drift',
    'dio_per_cpu',
    'kthread_waits',
    'layered_cost',
    'merge_results',
    'noise_floor',
    'per_app_eval',
    'placement_vs_result',
    'pool_rounds',
    'progdiff',
    'routing_ceiling',
    'standby_switch_times',
    'switch_transient',
    'task_census',
    'thread_census',
    'tick_phase',
    'task_states',
    'thread_samples',
    'tick_cost',
    'timer_gaps',
    'wake_tails',
    'yardstick_stalls',
)
"""The runnable modules (the helpers common, procfs and tracefs_events have no main)."""
