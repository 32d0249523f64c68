"""When do a live calibration's latency stalls happen, and what do other estimators of the
office probe's tail do to the noise floor? (issue 40, step 0: results/2026-11-29-yardstick-stalls)

Reads an unpacked live calibration run (its raw.tar.xz): results.json (every run's expert,
repetition, phases and raw probe samples), calibrate.log (the runner's and the supervisor's
log lines: the run blocks and the switches), agent/agent-*.log and agent-*.jsonl (each
`asa run`'s log and decision log) and guest/dmesg.txt (the kernel's sched_ext lines).

Rebuilds every sample's time from the probes' own code: the office and web probes' seeded
timelines (scenarios/src/clock.rs xorshift64*, scenarios/src/probes/{office,web}.rs), the game
probe's cumulative frame times, the audio probe's 5 ms periods with its underrun restarts. A
stall is a sample above 150 ms; "early" is the first 12 s of the probe (14 s after a static
expert's attach). Prints, per run, the previous run, the quiet time since the last load
stopped, the scheduler's age at the load start and the stalls; then the stall rates by arm
and by (scheduler age, quiet time) at every load start with one-sided Fisher tests, the
kernel's sched_ext events and a grid of tail and stability estimators on the office runs.
--json writes all of it (one line per run, load start and estimator row).

Usage (from lab/analysis, or with PYTHONPATH=lab/analysis):
    python -m asa_analysis.yardstick_stalls RAW_DIR [--json stalls.json]
"""
import argparse
import collections
import datetime as dt
import json
import math
import os
import re
import statistics
import sys
from math import comb

from .common import read_json, read_text

THRESH = 150.0   # ms: a sample above it is a stall
EARLY = 12.0     # s of probe time (= 14 s after a static expert's attach) counted as "early"


def ts(s):
    """Unix ms of a log line's UTC stamp (2026-11-28T09:10:11.123Z)."""
    return int(dt.datetime.strptime(s, '%Y-%m-%dT%H:%M:%S.%fZ').replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


class Rng:
    """scenarios/src/clock.rs: xorshift64*."""
    M = (1 << 64) - 1

    def __init__(self, seed):
        self.s = seed or 0x9E3779B97F4A7C15

    def next(self):
        x = self.s
        x ^= x >> 12
        x ^= (x << 25) & self.M
        x ^= x >> 27
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & self.M

    def uniform(self, lo, hi):
        return lo + (hi - lo) * ((self.next() >> 11) / float(1 << 53))

    def int(self, lo, hi):
        return lo + self.next() % (hi - lo + 1)


def office_due(duration_s):
    """Seconds since the probe start at which the office probe types each key (catalogue:
    seed 7, words of 3..8 keys 60..160 ms apart, 250 ms between words)."""
    r, due, end, out = Rng(7), 0, int(duration_s * 1e9), []
    while True:
        due += int(250.0 * 1e6)
        for _ in range(r.int(3, 8)):
            due += int(r.uniform(60.0, 160.0) * 1e6)
            if due >= end:
                return out
            out.append(due / 1e9)
            r.int(0, 25)


def web_due(duration_s):
    """Seconds since the probe start of each web click (catalogue: seed 42, bursts of 1..4
    clicks 60 ms apart, 200..600 ms idle between bursts)."""
    r, due, end, out = Rng(42), 0, int(duration_s * 1e9), []
    while True:
        due += int(r.uniform(200.0, 600.0) * 1e6)
        for i in range(r.int(1, 4)):
            if i > 0:
                due += int(60.0 * 1e6)
            if due >= end:
                return out
            out.append(due / 1e9)


def sample_times(kind, samples, duration_s):
    """[(s since the probe start, ms)] of the series of a `kind` probe that shows stalls:
    office keystrokes, web clicks, game frames, audio periods."""
    if kind == 'office':
        lat = samples['input_latency_ms']
        due = office_due(duration_s)
        assert len(due) == len(lat)
        return list(zip(due, lat))
    if kind == 'web':
        lat = samples['response_ms']
        due = web_due(duration_s)
        assert len(due) == len(lat)
        return list(zip(due, lat))
    if kind == 'game':
        out, t = [], 0.0
        for f in samples['frame_time_ms']:
            out.append((t, f))
            t += f / 1e3
        return out
    out, due = [], 0.005  # audio: a period late by more than its buffer restarts from then
    for c in samples['compute_latency_ms']:
        out.append((due, c))
        due += (c / 1e3 + 0.005) if c > 10.0 else 0.005
    return out


def windows(st):
    """Stall windows of a timeline: [start s, end s (last completion), samples, max ms];
    stalls less than 50 ms apart share a window."""
    cl = []
    for t, v in st:
        if v <= THRESH:
            continue
        s, e = t, t + v / 1e3
        if cl and s <= cl[-1][1] + 0.05:
            cl[-1][1] = max(cl[-1][1], e)
            cl[-1][2] += 1
            cl[-1][3] = max(cl[-1][3], v)
        else:
            cl.append([s, e, 1, v])
    return [[round(a, 2), round(b, 2), n, round(m)] for a, b, n, m in cl]


def stall_counts(st):
    """(stalls in the first EARLY s, stalls after) of a timeline."""
    return (sum(1 for t, v in st if t < EARLY and v > THRESH),
            sum(1 for t, v in st if t >= EARLY and v > THRESH))


LINE = re.compile(r'\[(\S+) \w+ +(\S+)\] (.*)')


def log_lines(text, mod_re=None):
    """(unix ms, module, message) of each env_logger line of `text` (module matching mod_re)."""
    for line in text.splitlines():
        m = LINE.match(line)
        if m and (mod_re is None or re.search(mod_re, m.group(2))):
            yield ts(m.group(1)), m.group(2), m.group(3)


def read_raw(raw_dir):
    """The inputs of a live run's folder: results.json, calibrate.log, the agent's logs
    ({stamp: (log text, decision-log text)}) and the guest's dmesg."""
    agent_dir = os.path.join(raw_dir, 'agent')
    agents = {}
    for name in sorted(os.listdir(agent_dir)) if os.path.isdir(agent_dir) else []:
        m = re.fullmatch(r'agent-(\d+)\.log', name)
        if m:
            agents[m.group(1)] = (read_text(os.path.join(agent_dir, name)),
                                  read_text(os.path.join(agent_dir, name[:-4] + '.jsonl')))
    return dict(results=read_json(os.path.join(raw_dir, 'results.json')),
                calibrate_log=read_text(os.path.join(raw_dir, 'calibrate.log')),
                agents=agents, dmesg=read_text(os.path.join(raw_dir, 'guest', 'dmesg.txt')))


def agent_runs(agents):
    """Per agent log stamp: its switches, when it left the machine on EEVDF, its ticks."""
    out = {}
    for stamp, (log, jsonl) in agents.items():
        ev = list(log_lines(log))
        out[stamp] = dict(
            switched=[t for t, m, msg in ev if m == 'asa_experts::supervisor' and msg.startswith('switched ')],
            stopped=[t for t, m, msg in ev if 'the machine is on EEVDF' in msg],
            ticks=[json.loads(line) for line in jsonl.splitlines() if line.strip()])
    return out


def build(results, calibrate_log, agents):
    """Every run of results.json in start order, with its index, previous run, agent, when the
    scheduler it measures took over (`change`), its first load's start, when its last load
    stopped and its stall series `st`."""
    runs = []
    for s in results['scenarios']:
        for r in s['runs']:
            runs.append(dict(scenario=s['scenario'], probe=s['probe'], expert=r['expert'], rep=r['rep'],
                             valid=r['valid'], start=r['started_unix_ms'], probe_start=r['probe_started_unix_ms'],
                             duration=r['probe']['elapsed_s'], phases=r['phases'], samples=r['probe']['samples']))
    runs.sort(key=lambda r: r['start'])
    blocks = []
    for t, mod, msg in log_lines(calibrate_log):
        if re.search(r'\] run \d+/\d+$', msg):
            blocks.append([])
            continue
        if blocks:
            blocks[-1].append((t, mod, msg))
    assert len(blocks) == len(runs)
    agent = agent_runs(agents)
    prev_agent = None
    for i, (r, b) in enumerate(zip(runs, blocks)):
        r['index'] = i + 1
        r['prev'] = runs[i - 1] if i else None
        change = None  # when the scheduler the run measures took over
        for t, mod, msg in b:
            if mod == 'asa_experts::supervisor' and msg.startswith('switched '):
                change = t
            m = re.search(r'decision log .*agent-(\d+)\.jsonl', msg)
            if m:
                r['agent'] = agent[m.group(1)]
            m = re.search(r'agent warm after ([\d.]+) s', msg)
            if m:
                r['warm_s'] = float(m.group(1))
        if 'agent' in r:
            change = r['agent']['switched'][0]
        elif change is None and prev_agent is not None and r['prev'] is not None and r['prev'].get('agent'):
            change = r['prev']['agent']['stopped'][0]  # the agent restored EEVDF
        prev_agent = r.get('agent')
        r['change'] = change
        r['load_start'] = r['phases'][0]['started_unix_ms']
        busy = [ph for ph in r['phases'] if ph['load'] != 'idle']
        r['loads_end'] = busy[-1]['ended_unix_ms'] if busy else None  # when its last load stopped
        r['st'] = sample_times(r['probe'], r['samples'], r['duration'])
    return runs


def first_load(r):
    """When a run's first phase with a load started (None: only idle phases)."""
    return next((ph['started_unix_ms'] for ph in r['phases'] if ph['load'] != 'idle'), None)


def watchdog_events(runs, dmesg, calibrate_log, agents):
    """sched_ext lines of the guest's dmesg other than enable/disable, on the wall clock (offset from
    the 'enabled' lines matched to the switches logged by calibrate.log and the agents)."""
    ev = [(float(m.group(1)), m.group(2)) for m in (re.match(r'\[ *([\d.]+)\] sched_ext: (.*)', line) for line in dmesg.splitlines()) if m]
    sw = sorted([t for t, mod, msg in log_lines(calibrate_log, 'supervisor') if re.match(r'switched \S+ -> (?!eevdf)', msg)] +
                [t for log, _ in agents.values() for t, mod, msg in log_lines(log, 'supervisor') if msg.startswith('switched ')])
    en = [u for u, msg in ev if msg.endswith('enabled')]
    assert len(en) == len(sw)
    off = statistics.median(t - u * 1000 for u, t in zip(en, sw))
    out = []
    for u, msg in ev:
        if msg.endswith('enabled') or msg.endswith('(unregistered from user space)'):
            continue
        t = u * 1000 + off
        r = next((r for r in runs if r['start'] - 5000 <= t <= r['phases'][-1]['ended_unix_ms'] + 5000), None)
        out.append(dict(uptime_s=u, utc=dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).isoformat(timespec='milliseconds'), message=msg,
                        run=f"{r['scenario']} {r['expert']} rep {r['rep'] + 1}" if r else None,
                        after_scheduler_change_s=round((t - r['change']) / 1000, 1) if r and r['change'] else None))
    return out


def arm(r):
    """The arm of a run: eevdf, `asa run` or a static scx expert."""
    return 'eevdf' if r['expert'] == 'eevdf' else ('asa run' if r['expert'] == 'asa' else 'static scx')


# ----------------------------------------------------------------------------- scoring (office)
def pct(xs, p):
    """scenarios/src/stats.rs percentile (R-7)."""
    s = sorted(xs)
    k = p / 100 * (len(s) - 1)
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def value(x, theta, f, k, lower=True):
    """score.rs ValueCurve with gamma_v = 1."""
    e = (1 if lower else -1) * k * (x - theta) / f
    return 0.0 if e > 700 else 1 / (1 + math.exp(e))


def relvar(xs):
    """Variance / mean² (score.rs SigmaOf::RelativeVariance)."""
    m = statistics.fmean(xs)
    return statistics.pvariance(xs) / (m * m)


def office_scores(rs, tail, sigma, tail_theta=50.0, k_s=2.0):
    """The office probe's run scores (catalogue weights: p99 2, stability 1, p50 1, autosave 0.5,
    each load phase 1) with `tail` in the p99 slot and `sigma` in the stability slot."""
    thetas = [statistics.median(r['phases'][i]['output']['throughput'] for r in rs) for i in range(len(rs[0]['phases']))]
    out = []
    for r in rs:
        lat = r['samples']['input_latency_ms']
        parts = [(2.0, value(tail(r), tail_theta, tail_theta / 2, 1.0)), (1.0, 1 / (1 + k_s * sigma(lat))),
                 (1.0, value(pct(lat, 50), 20.0, 10.0, 1.0)), (0.5, value(pct(r['samples']['autosave_ms'], 99), 200.0, 100.0, 1.0))]
        parts += [(1.0, value(r['phases'][i]['output']['throughput'], th, th, 4.0, lower=False)) for i, th in enumerate(thetas)]
        out.append(sum(w * s for w, s in parts) / sum(w for w, _ in parts))
    return out


def betacf(a, b, x):
    """Continued fraction of the incomplete beta function (Numerical Recipes)."""
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d or 1e-300)
    h = d
    for m in range(1, 500):
        for aa in (m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)), -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))):
            d = 1 / ((1 + aa * d) or 1e-300)
            c = (1 + aa / c) or 1e-300
            h *= d * c
        if abs(d * c - 1) < 3e-14:
            break
    return h


def ibeta(a, b, x):
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0 or x >= 1:
        return float(x >= 1)
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    return math.exp(lbt) * betacf(a, b, x) / a if x < (a + 1) / (a + b + 2) else 1 - math.exp(lbt) * betacf(b, a, 1 - x) / b


def harrell_davis(xs, p):
    """The Harrell-Davis estimate of quantile p (0..1)."""
    s = sorted(xs)
    n = len(s)
    a, b = p * (n + 1), (1 - p) * (n + 1)
    cdf = [ibeta(a, b, i / n) for i in range(n + 1)]
    return sum((cdf[i + 1] - cdf[i]) * s[i] for i in range(n))


def window_median(st, k=6):
    """The median over k equal time windows of a timeline of each window's p99."""
    T = max(t for t, _ in st) + 1e-9
    return statistics.median(pct([v for t, v in st if i * T / k <= t < (i + 1) * T / k], 99) for i in range(k))


def LAT(r):
    return r['samples']['input_latency_ms']


TAILS = {
    'p99 (now)': lambda r: pct(LAT(r), 99),
    'Harrell-Davis p99': lambda r: harrell_davis(LAT(r), 0.99),
    'p95': lambda r: pct(LAT(r), 95),
    'p90': lambda r: pct(LAT(r), 90),
    'geometric mean': lambda r: math.exp(statistics.fmean(math.log(x) for x in LAT(r))),
    'median of 6 window p99s': lambda r: window_median(r['st']),
    'p99 without the first 12 s': lambda r: pct([v for t, v in r['st'] if t >= EARLY], 99),
}
SIGMAS = {
    'relative variance (now)': relvar,
    'variance of ln latency': lambda lat: statistics.pvariance([math.log(x) for x in lat]),
    '(ln p90 - ln p50)^2': lambda lat: (math.log(pct(lat, 90)) - math.log(pct(lat, 50))) ** 2,
}


def estimator_table(runs):
    """A row per (tail, stability) estimator pair on the office runs: its own spread between
    repetitions (ln units), the static cells' score SD and every cell's mean score; θ and k_s
    rescaled so the pooled median run keeps its place on the curves."""
    office = [r for r in runs if r['probe'] == 'office']
    p99_med = statistics.median(TAILS['p99 (now)'](r) for r in office)
    rv_med = statistics.median(relvar(LAT(r)) for r in office)
    rows = []
    for sn, sf in SIGMAS.items():
        k_s = 2.0 * rv_med / statistics.median(sf(LAT(r)) for r in office)  # median run keeps its stability score
        for tn, tf in TAILS.items():
            if sn != 'relative variance (now)' and tn not in ('p99 (now)', 'geometric mean', 'median of 6 window p99s'):
                continue
            vals = {r['index']: tf(r) for r in office}
            theta = 50.0 * statistics.median(vals.values()) / p99_med  # same place on the curve as p99's 50 ms
            cells = collections.defaultdict(list)
            ln = collections.defaultdict(list)
            for sc in sorted({r['scenario'] for r in office}):
                rs = [r for r in office if r['scenario'] == sc]
                for r, s in zip(rs, office_scores(rs, lambda r: vals[r['index']], sf, theta, k_s)):
                    cells[(sc, r['expert'])].append(s)
                    ln[(sc, r['expert'])].append(math.log(vals[r['index']]))
            sd = [statistics.stdev(v) for k, v in cells.items() if k[1] != 'asa']
            lsp = [abs(v[0] - v[1]) for k, v in ln.items() if k[1] != 'asa']
            rows.append(dict(tail=tn, stability=sn, theta_ms=round(theta, 1), k_s=round(k_s, 2),
                             estimator_ln_spread_median=round(statistics.median(lsp), 2), estimator_ln_spread_max=round(max(lsp), 2),
                             score_sd_static_median=round(statistics.median(sd), 3), score_sd_static_max=round(max(sd), 3),
                             means={f'{a}/{b}': round(statistics.fmean(v), 3) for (a, b), v in sorted(cells.items())}))
    return rows


def fisher(a, n1, b, n2):
    """One-sided Fisher exact test: P(>= a of the a+b stalled runs fall in group 1 of n1)."""
    k = a + b
    return sum(comb(n1, i) * comb(n2, k - i) for i in range(a, min(k, n1) + 1)) / comb(n1 + n2, k)


# ----------------------------------------------------------------------------- the analysis
def run_record(r, memory_mib):
    """One run's line of the output."""
    p = r['prev']
    st = r['st']
    early = [v for t, v in st if t < EARLY and v > THRESH]
    late = [v for t, v in st if t >= EARLY and v > THRESH]
    first = next(((t, v) for t, v in st if v > THRESH), None)
    age_probe = (r['probe_start'] - r['change']) / 1e3 if r['change'] else None
    rec = dict(index=r['index'], scenario=r['scenario'], expert=r['expert'], rep=r['rep'] + 1, arm=arm(r),
               probe=r['probe'], valid=r['valid'], first_phase=r['phases'][0]['load'],
               previous=dict(scenario=p['scenario'], expert=p['expert'], last_load=p['phases'][-1]['load']) if p else None,
               quiet_s=round((first_load(r) - p['loads_end']) / 1e3, 1) if p and p['loads_end'] and first_load(r) else None,
               scheduler_age_at_load_s=round((first_load(r) - r['change']) / 1e3, 1) if r['change'] and first_load(r) else None,
               scheduler_age_at_probe_s=round(age_probe, 1) if age_probe is not None else None,
               agent_warm_s=r.get('warm_s'), samples=len(st), threshold_ms=THRESH,
               stalls=len(early) + len(late), stalls_first_12s=len(early), stalls_after_12s=len(late),
               max_ms=round(max(v for _, v in st), 1), max_first_12s_ms=round(max(v for t, v in st if t < EARLY), 1),
               first_stall_probe_s=round(first[0], 2) if first else None,
               first_stall_after_scheduler_change_s=round(first[0] + age_probe, 2) if first and age_probe is not None else None,
               stall_windows=windows(st))
    if 'agent' in r:  # the agent's first tick: Dirty a few seconds after the previous run's loads ended
        t1 = r['agent']['ticks'][0]
        rec['agent_tick1'] = dict(after_previous_loads_s=round((t1['unix_ms'] - p['phases'][-1]['ended_unix_ms']) / 1e3, 1) if p else None,
                                  dirty_mib=round(t1['features']['mem_dirty_share'] * memory_mib, 2),
                                  disk_write_ops_per_s=round(t1['features'].get('disk_write_ops_per_s', 0), 1))
    return rec


def load_starts(runs):
    """Every load start (a run's first load, or a later phase's): the scheduler's age then, the
    quiet time since the previous load stopped, and the stalls in the EARLY s of probe after it."""
    starts = []
    for r in runs:
        for i, ph in enumerate(r['phases']):
            if ph['load'] == 'idle':
                continue
            t0 = (ph['started_unix_ms'] - r['probe_start']) / 1e3
            before = [q for q in r['phases'][:i] if q['load'] != 'idle']
            prev_end = before[-1]['ended_unix_ms'] if before else (r['prev']['loads_end'] if r['prev'] else None)
            w = [v for t, v in r['st'] if max(t0, 0) <= t < t0 + EARLY]
            age = (ph['started_unix_ms'] - r['change']) / 1e3 if r['change'] else None
            starts.append(dict(index=r['index'], scenario=r['scenario'], expert=r['expert'], rep=r['rep'] + 1, arm=arm(r),
                               probe=r['probe'], phase=i + 1, load=ph['load'],
                               scheduler_age_s=round(age, 1) if age is not None else None,
                               quiet_s=round((ph['started_unix_ms'] - prev_end) / 1e3, 1) if prev_end else None,
                               stalls_next_12s=sum(v > THRESH for v in w), max_next_12s_ms=round(max(w))))
    return starts


def start_group(x):
    """The row of the load-start table a load start falls in: arm, scheduler age, quiet time."""
    if x['arm'] == 'eevdf':
        g = 'EEVDF'
    else:
        g = f"{x['arm']}, scheduler {'< 15 s' if x['scheduler_age_s'] < 15 else '>= 30 s'} old"
    return g + (', quiet < 3 s' if (x['quiet_s'] is not None and x['quiet_s'] < 3) else ', quiet >= 3 s')


def previous_kind(previous):
    """What a static expert's run followed: an attach from EEVDF, or a switch."""
    if previous is None:
        return 'nothing (the first run)'
    return 'EEVDF or the agent (attach from EEVDF)' if previous['expert'] in ('eevdf', 'asa') else 'another scx expert (switch)'


def analyse(raw):
    """Everything the module writes, from read_raw's inputs, and the per-run records."""
    runs = build(raw['results'], raw['calibrate_log'], raw['agents'])
    per_run = [run_record(r, raw['results']['machine']['memory_mib']) for r in runs]
    no_web = [x for x in per_run if x['probe'] != 'web']
    by_arm = collections.defaultdict(lambda: dict(runs=0, runs_with_early_stall=0, early_stall_samples=0, late_stall_samples=0))
    for x in no_web:
        for key in (x['arm'], f"{x['arm']} {x['scenario']}"):
            a = by_arm[key]
            a['runs'] += 1
            a['runs_with_early_stall'] += x['stalls_first_12s'] > 0
            a['early_stall_samples'] += x['stalls_first_12s']
            a['late_stall_samples'] += x['stalls_after_12s']
    s, o = by_arm['static scx'], [by_arm['eevdf'], by_arm['asa run']]
    fisher_p = fisher(s['runs_with_early_stall'], s['runs'], sum(x['runs_with_early_stall'] for x in o), sum(x['runs'] for x in o))
    scx = [x for x in no_web if x['arm'] == 'static scx']
    by_position = collections.defaultdict(lambda: [0, 0])
    for x in scx:
        for key in (f"after {previous_kind(x['previous'])}",
                    f"expert {x['expert']}", f"rep {x['rep']}"):
            by_position[key][0] += 1
            by_position[key][1] += x['stalls_first_12s'] > 0
    starts = load_starts(runs)
    groups = collections.defaultdict(lambda: dict(load_starts=0, with_stall=0, stall_samples=0))
    for x in starts:
        if x['probe'] == 'web':
            continue
        g = groups[start_group(x)]
        g['load_starts'] += 1
        g['with_stall'] += x['stalls_next_12s'] > 0
        g['stall_samples'] += x['stalls_next_12s']
    fresh = [x for x in starts if x['probe'] != 'web' and x['arm'] == 'static scx' and x['scheduler_age_s'] < 15]
    old = [x for x in starts if x['probe'] != 'web' and x['arm'] != 'eevdf' and x['scheduler_age_s'] >= 15]
    fisher_age = fisher(sum(x['stalls_next_12s'] > 0 for x in fresh), len(fresh), sum(x['stalls_next_12s'] > 0 for x in old), len(old))
    est = estimator_table(runs)
    wd = watchdog_events(runs, raw['dmesg'], raw['calibrate_log'], raw['agents'])
    return dict(source='results/2026-11-28-agent-live-stay-on-cosmos/raw.tar.xz', threshold_ms=THRESH, early_window_probe_s=EARLY,
                note='web probe (P2, S19) stalls under video_encode/disk_io in every arm, EEVDF most: left out of the early-stall summary',
                summary_without_web=dict(by_arm), fisher_one_sided_p_static_vs_eevdf_and_agent=fisher_p,
                static_scx_early_stall_by_position={k: dict(runs=v[0], with_early_stall=v[1]) for k, v in sorted(by_position.items())},
                load_starts_without_web=dict(sorted(groups.items())), fisher_one_sided_p_fresh_vs_old_scheduler=fisher_age,
                kernel_sched_ext_events=wd, load_starts=starts, office_estimators=est, runs=per_run)


def to_json(out):
    """The output as JSON text: one line per run, load start and estimator row."""
    return '{\n' + ',\n'.join(
        f' {json.dumps(k)}: ' + ('[\n' + ',\n'.join('  ' + json.dumps(x) for x in v) + '\n ]' if isinstance(v, list) else json.dumps(v))
        for k, v in out.items()) + '\n}\n'


def report_lines(out):
    """The lines the module prints."""
    lines = ['idx scen expert rep | prev (scenario/expert/last load) | quiet s | sched age at load s | stalls early/late | max first 12 s | windows']
    for x in out['runs']:
        pv = x['previous']
        lines.append(
            f"{x['index']:3d} {x['scenario']:4s} {x['expert']:8s} {x['rep']} | {pv['scenario'] + '/' + pv['expert'] + '/' + pv['last_load'] if pv else '-':28s} | "
            f"{x['quiet_s'] if x['quiet_s'] is not None else '-':>5} | {x['scheduler_age_at_load_s'] if x['scheduler_age_at_load_s'] is not None else '-':>5} | "
            f"{x['stalls_first_12s']:3d}/{x['stalls_after_12s']:3d} | {x['max_first_12s_ms']:7.0f} | {x['stall_windows'][:3]} {x.get('agent_tick1', '')}")
    lines.append('\nby arm (no web):')
    lines += [f'  {k} {v}' for k, v in sorted(out['summary_without_web'].items())]
    lines.append(f"Fisher one-sided p: {out['fisher_one_sided_p_static_vs_eevdf_and_agent']}")
    by_position = {k: [v['runs'], v['with_early_stall']] for k, v in out['static_scx_early_stall_by_position'].items()}
    lines.append(f'static scx early stalls by position: {by_position}')
    lines.append('load starts (no web):')
    lines += [f'  {k} {v}' for k, v in sorted(out['load_starts_without_web'].items())]
    lines.append(f"Fisher one-sided p, fresh (<15 s) vs old (>=30 s) scx scheduler at a load start: {out['fisher_one_sided_p_fresh_vs_old_scheduler']}")
    lines.append(f"kernel sched_ext events: {out['kernel_sched_ext_events']}")
    lines.append('\noffice estimators (S10 + P4):')
    for e in out['office_estimators']:
        lines.append(
            f"  {e['tail']:28s} {e['stability']:24s} ln-spread med {e['estimator_ln_spread_median']:.2f} max {e['estimator_ln_spread_max']:.2f} "
            f"score sd static med {e['score_sd_static_median']:.3f} max {e['score_sd_static_max']:.3f} | " +
            ' '.join(f"{k}={v:.3f}" for k, v in e['means'].items() if k.split('/')[1] in ('eevdf', 'cosmos', 'asa')))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('raw_dir', help='an unpacked live calibration run (results.json, calibrate.log, agent/, guest/dmesg.txt)')
    ap.add_argument('--json', help='also write the analysis as JSON here (e.g. stalls.json)')
    args = ap.parse_args(argv)
    for need in ('results.json', 'calibrate.log', os.path.join('guest', 'dmesg.txt')):
        if not os.path.exists(os.path.join(args.raw_dir, need)):
            sys.exit(f'{args.raw_dir}: no {need} (not an unpacked live run? tar xJf its raw.tar.xz)')
    out = analyse(read_raw(args.raw_dir))
    if args.json:
        with open(args.json, 'w') as f:
            f.write(to_json(out))
    print('\n'.join(report_lines(out)))


if __name__ == '__main__':
    main()
