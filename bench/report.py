#!/usr/bin/env python3
"""bench/report.py: summary.txt and one self-contained report.html (inline SVG)
from the CSVs that bench/suite.sh writes. Python 3 standard library only.

usage: report.py DIR
           reads DIR/results.csv and, where present, DIR/limits.csv, runs.csv and
           meta.txt; writes DIR/summary.txt and DIR/report.html
       report.py --csv FILE [--csv FILE ...] [--limits FILE] [--runs FILE]
                 [--meta FILE] [--html OUT] [--summary OUT]
           the same from any sluice-bench --csv files (runs.csv absent: each
           label is one run; 'CONFIG.NAME.rROUND' labels are understood)
       report.py --self-test
           builds small synthetic inputs in a temp dir and checks the outputs

Inputs (all but the results CSV may be missing, and so may any kind of run):
  results.csv  label,workload,mode,kind,t_s,...   kind = interval | summary
               (broker_cpu_ms_per_mib: sluice-bench --broker-pid, summary rows)
  runs.csv     label,config,name,round,tool,...,broker_cpu_pct,other_cpu_pct,...
  limits.csv   metric,value,unit,detail           (disk_seq_write (O_DIRECT), disk_buffered_write,
                                                  disk_prealloc_write, fdatasync_rate, ...)
  meta.txt     'key: value' lines; 'configs: A,B' marks a comparison
Ratios are taken per round (both sides measured minutes apart, under the same
noise), then reported as median and min..max over the rounds.
"""
import csv
import html
import math
import os
import re
import statistics
import sys
import tempfile

# The standard suite's workloads, in report order, with their headline names.
NAMES = [
    ("produce-plain-1k", "produce 1 KiB plain, acks=-1"),
    ("produce-idem-1k", "produce 1 KiB idempotent, acks=-1"),
    ("produce-txn-1k", "produce 1 KiB transactional, acks=-1"),
    ("produce-plain-100", "produce 100 B plain, acks=-1"),
    ("consume-uncommitted", "consume read_uncommitted"),
    ("consume-committed", "consume read_committed"),
    ("e2e-1k", "end to end 1 KiB, one record in flight"),
    ("rdk-produce-1k", "librdkafka produce 1 KiB, acks=all (defaults)"),
]
# Ratios within one configuration: (numerator, denominator, what it says, paired).
# Paired ratios are taken per round (both sides ran on the same broker session);
# the librdkafka run has a session of its own, so it is set against the median.
RATIOS = [
    ("produce-idem-1k", "produce-plain-1k", "idempotent / plain (MB/s)", True),
    ("produce-txn-1k", "produce-idem-1k", "transactional / idempotent (MB/s)", True),
    ("consume-committed", "consume-uncommitted", "read_committed / read_uncommitted (MB/s)", True),
    ("rdk-produce-1k", "produce-plain-1k", "librdkafka / sluice-bench median, plain 1 KiB (MB/s)", False),
]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf"]
LABEL_RE = re.compile(r"^(.+)\.([^.]+)\.r(\d+)$")


def num(v, unit=""):
    """A figure for people: 3 significant digits, thousands grouped, '-' if unknown."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    a = abs(v)
    s = f"{v:,.0f}" if a >= 1000 else f"{v:.1f}" if a >= 100 else f"{v:.2f}" if a >= 1 else f"{v:.3f}"
    return s + unit


def fval(row, key):
    try:
        return float(row.get(key, ""))
    except (TypeError, ValueError):
        return None


def spread(vals):
    """(median, min, max) of the known values, or None."""
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return statistics.median(vals), min(vals), max(vals)


def fmt_spread(s, unit="", digits=None):
    if s is None:
        return "-"
    f = (lambda v: f"{v:.{digits}f}") if digits is not None else num
    if s[1] == s[2]:
        return f(s[0]) + unit
    return f"{f(s[0])}{unit} ({f(s[1])}..{f(s[2])})"


# ---- reading ------------------------------------------------------------------------

def read_csv(path):
    if not path or not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_meta(path):
    meta = []
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                if ":" in line:
                    k, v = line.rstrip("\n").split(":", 1)
                    meta.append((k.strip(), v.strip()))
    return meta


class Run:
    """One run of one workload: its summary row, interval rows and bookkeeping."""

    def __init__(self, label):
        self.label = label
        m = LABEL_RE.match(label)
        self.config, self.name, self.round = (m.group(1), m.group(2), int(m.group(3))) if m else ("", label, 1)
        self.summary = None
        self.intervals = []
        self.info = {}

    def get(self, key):
        v = fval(self.summary, key) if self.summary else None
        return v if v is not None else fval(self.info, key)

    @property
    def offered(self):
        return self.get("offered_rate") or 0.0


def load(results, runs_path):
    runs = {}
    for path in results:
        for row in read_csv(path):
            label = row.get("label", "")
            if not label or label == "label":
                continue
            run = runs.setdefault(label, Run(label))
            if row.get("kind") == "summary":
                run.summary = row
            elif row.get("kind") == "interval":
                run.intervals.append(row)
    for row in read_csv(runs_path):
        run = runs.setdefault(row["label"], Run(row["label"]))
        run.info = row
        run.config, run.name = row.get("config", run.config), row.get("name", run.name)
        try:
            run.round = int(row.get("round") or run.round)
        except ValueError:
            pass
    for run in runs.values():
        run.intervals.sort(key=lambda r: fval(r, "t_s") or 0.0)
        run.intervals = full_intervals(run.intervals)
    return list(runs.values())


def full_intervals(rows):
    """Drops a last, partial interval (sluice-bench reports the stub between the
    last full interval and the end): its rate over a few ms is noise."""
    ts = [fval(r, "t_s") for r in rows]
    if len(rows) < 3 or None in ts:
        return rows
    step = statistics.median(b - a for a, b in zip(ts, ts[1:]))
    return rows[:-1] if ts[-1] - ts[-2] < 0.5 * step else rows


def group(runs):
    """{config: {name: [runs by round]}}, configs and names in first-seen order."""
    g = {}
    for run in runs:
        g.setdefault(run.config, {}).setdefault(run.name, []).append(run)
    for names in g.values():
        for lst in names.values():
            lst.sort(key=lambda r: r.round)
    return g


def name_order(names):
    known = [n for n, _ in NAMES if n in names]
    opens = sorted((n for n in names if n.startswith("open-")), key=lambda n: (len(n), n))
    return known + [n for n in names if n not in known and n not in opens] + opens


def title(name):
    if name.startswith("open-"):
        return f"open loop at {name[5:]} % of the reference rate, idempotent 1 KiB"
    return dict(NAMES).get(name, name)


def per_round_ratio(num_runs, den_runs, key):
    den = {r.round: r.get(key) for r in den_runs if r.summary}
    vals = []
    for r in num_runs:
        a, b = r.get(key) if r.summary else None, den.get(r.round)
        if a is not None and b:
            vals.append(a / b)
    return spread(vals)


# ---- summary.txt --------------------------------------------------------------------

def summarise(runs, limits, meta):
    g = group(runs)
    lim = {r["metric"]: fval(r, "value") for r in limits}
    configs = next((v.split(",") for k, v in meta if k == "configs"), None) or list(g)
    out = [f"{k}: {v}" for k, v in meta]
    headline = []  # (figure, value text) for the HTML table
    out.append("")
    if lim:
        parts = []
        if lim.get("disk_seq_write"):
            parts.append(("disk sequential write", f"{num(lim['disk_seq_write'])} MB/s"))
        if lim.get("disk_buffered_write"):
            parts.append(("buffered write", f"{num(lim['disk_buffered_write'])} MB/s"))
        if lim.get("disk_prealloc_write"):
            parts.append(("buffered write into a preallocated file", f"{num(lim['disk_prealloc_write'])} MB/s"))
        if lim.get("fdatasync_rate"):
            parts.append(("small durable writes", f"{num(lim['fdatasync_rate'])} O_DSYNC 4 KiB writes/s "
                          f"({num(lim.get('fdatasync_ms'))} ms each)"))
        if lim.get("loopback_tcp"):
            parts.append(("loopback TCP", f"{num(lim['loopback_tcp'])} MB/s"))
        out.append("limits (this machine, this run): " + "; ".join(f"{k} {v}" for k, v in parts))
        headline += [("limit: " + k, v) for k, v in parts]
    disk = lim.get("disk_seq_write")
    for cfg in configs:
        names = g.get(cfg, {})
        if not names:
            continue
        out.append("")
        out.append(f"== {cfg or 'runs'}: medians over rounds, (min..max); MB = MiB of record values ==")
        for name in name_order(names):
            rs = [r for r in names[name] if r.summary]
            failed = [r for r in names[name] if not r.summary or (r.info.get("rc") not in (None, "", "0"))]
            if not rs:
                out.append(f"  {title(name)}: no result ({len(failed)} failed run(s))")
                continue
            mb = spread([r.get("mb_per_s") for r in rs])
            rps = spread([r.get("rec_per_s") for r in rs])
            p50 = spread([r.get("p50_ms") for r in rs])
            p99 = spread([r.get("p99_ms") for r in rs])
            line = f"  {title(name)}: {fmt_spread(rps)} rec/s, {fmt_spread(mb)} MB/s, " \
                   f"p50 {fmt_spread(p50, ' ms')}, p99 {fmt_spread(p99, ' ms')}"
            if rs[0].offered:
                line += f", offered {num(rs[0].offered)} rec/s"
            c50 = spread([r.get("commit_p50_ms") for r in rs if r.get("commit_p50_ms")])
            if c50 and name.startswith("produce-txn"):
                line += f", commit p50 {fmt_spread(c50, ' ms')}"
            errs = sum(r.get("errors") or 0 for r in rs)
            if errs:
                line += f", {errs:.0f} ERRORS"
            if failed:
                line += f", {len(failed)} FAILED run(s)"
            bcpu = spread([fval(r.info, "broker_cpu_pct") for r in rs])
            ocpu = spread([fval(r.info, "other_cpu_pct") for r in rs])
            if bcpu:
                line += f"; broker CPU {bcpu[0]:.0f} %"
            cpm = spread([r.get("broker_cpu_ms_per_mib") for r in rs if r.summary.get("broker_cpu_ms_per_mib")])
            if cpm:
                line += f"{',' if bcpu else ';'} broker CPU per MB {fmt_spread(cpm, ' ms', digits=2)}"
            if ocpu:
                line += f", other work {ocpu[0]:.0f} % (max {ocpu[2]:.0f})"
            out.append(line)
            headline.append((f"{cfg + ': ' if len(configs) > 1 else ''}{title(name)}",
                             f"{fmt_spread(mb)} MB/s, {fmt_spread(rps)} rec/s, p99 {fmt_spread(p99, ' ms')}"))
            if name == "produce-plain-1k" and disk:
                d = spread([r.get("mb_per_s") / disk for r in rs if r.get("mb_per_s") is not None])
                text = f"{fmt_spread(d, digits=3)} of the disk's sequential write ({num(disk)} MB/s)"
                out.append(f"    durable produce / disk sequential write: {text}")
                headline.append((f"{cfg + ': ' if len(configs) > 1 else ''}durable produce / disk seq. write", text))
        for a, b, what, paired in RATIOS:
            if a in names and b in names:
                if paired:
                    s = per_round_ratio(names[a], names[b], "mb_per_s")
                else:
                    den = spread([r.get("mb_per_s") for r in names[b] if r.summary])
                    s = spread([r.get("mb_per_s") / den[0] for r in names[a]
                                if r.summary and den and den[0] and r.get("mb_per_s") is not None])
                if s:
                    out.append(f"    ratio {what}: {fmt_spread(s, digits=3)}")
                    headline.append((f"{cfg + ': ' if len(configs) > 1 else ''}{what}", fmt_spread(s, digits=3)))
    opens = open_loop(g)
    if opens:
        out.append("")
        out.append("latency vs offered load (open loop, idempotent 1 KiB):")
        for cfg, pts in opens.items():
            for r in pts:
                out.append(f"  {cfg:>8} offered {num(r.offered):>9} rec/s: achieved {num(r.get('rec_per_s')):>9} rec/s,"
                           f" p50 {num(r.get('p50_ms'))} ms, p99 {num(r.get('p99_ms'))} ms,"
                           f" p99.9 {num(r.get('p999_ms'))} ms")
    cmp = compare(g, configs)
    if cmp:
        a, b = configs[0], configs[1]
        out.append("")
        out.append(f"comparison {b} / {a}: median of per-round ratios (min..max, rounds)")
        for name, key, s, n in cmp:
            out.append(f"  {title(name)} {key}: {fmt_spread(s, digits=3)}  [{n}]")
    return "\n".join(out) + "\n", headline


def open_loop(g):
    """{config: [runs with an offered rate, by rate]}; empty if there are none."""
    res = {}
    for cfg, names in g.items():
        pts = [r for lst in names.values() for r in lst if r.summary and r.offered > 0]
        if pts:
            res[cfg] = sorted(pts, key=lambda r: r.offered)
    return res


def compare(g, configs):
    """[(name, figure, (median, min, max), rounds)] of B/A for names both ran."""
    if len(configs) != 2 or not all(c in g for c in configs):
        return []
    a, b = g[configs[0]], g[configs[1]]
    res = []
    for name in name_order([n for n in b if n in a]):
        for key in ("mb_per_s", "p50_ms", "p99_ms", "broker_cpu_ms_per_mib"):
            s = per_round_ratio(b[name], a[name], key)
            if s:
                res.append((name, key, s, len([r for r in b[name] if r.summary])))
    return res


# ---- SVG ----------------------------------------------------------------------------

def nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(ticks[-1] + step)
    return ticks


def log_ticks(lo, hi):
    lo_e, hi_e = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if hi_e == lo_e:
        hi_e += 1
    ticks = []
    for e in range(lo_e, hi_e + 1):
        for m in ((1, 2, 5) if hi_e - lo_e <= 2 else (1,)):
            ticks.append(m * 10 ** e)
    return [t for t in ticks if 10 ** lo_e <= t <= 10 ** hi_e]


class Axis:
    """Maps data values onto pixels, linear or log10."""

    def __init__(self, vals, p0, p1, log=False, zero=True):
        vals = [v for v in vals if v is not None and (v > 0 or not log)]
        self.log, self.p0, self.p1 = log, p0, p1
        if log:
            vals = vals or [1.0]
            self.ticks = log_ticks(min(vals), max(vals))
        else:
            vals = vals or [0.0, 1.0]
            self.ticks = nice_ticks(min(vals + [0.0]) if zero else min(vals), max(vals))
        self.lo, self.hi = self.ticks[0], self.ticks[-1]

    def __call__(self, v):
        if self.log:
            v = max(v, self.lo)
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (v - self.lo) / ((self.hi - self.lo) or 1.0)
        return self.p0 + f * (self.p1 - self.p0)


def esc(s):
    return html.escape(str(s), quote=True)


def tick_label(t):
    return f"{t:g}" if abs(t) < 1e4 else f"{t / 1e3:g}k" if abs(t) < 1e6 else f"{t / 1e6:g}M"


def svg_frame(w, h, title_text, x, y, xlabel, ylabel, ml, mt, mb):
    """The axes, grid and labels of a chart; returns the list of SVG strings."""
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
         f'font-family="sans-serif" font-size="11">',
         f'<text x="{w / 2:.0f}" y="14" text-anchor="middle" font-size="13" font-weight="bold">{esc(title_text)}</text>']
    for t in y.ticks:
        py = y(t)
        s.append(f'<line x1="{ml}" y1="{py:.1f}" x2="{x.p1:.0f}" y2="{py:.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{ml - 4}" y="{py + 4:.1f}" text-anchor="end">{esc(tick_label(t))}</text>')
    for t in x.ticks:
        px = x(t)
        s.append(f'<line x1="{px:.1f}" y1="{mt}" x2="{px:.1f}" y2="{y.p0:.0f}" stroke="#eee"/>')
        s.append(f'<text x="{px:.1f}" y="{y.p0 + 14:.0f}" text-anchor="middle">{esc(tick_label(t))}</text>')
    s.append(f'<rect x="{ml}" y="{mt}" width="{x.p1 - ml:.0f}" height="{y.p0 - mt:.0f}" fill="none" stroke="#888"/>')
    s.append(f'<text x="{(ml + x.p1) / 2:.0f}" y="{h - mb / 4:.0f}" text-anchor="middle">{esc(xlabel)}</text>')
    s.append(f'<text x="12" y="{(mt + y.p0) / 2:.0f}" text-anchor="middle" '
             f'transform="rotate(-90 12 {(mt + y.p0) / 2:.0f})">{esc(ylabel)}</text>')
    return s


def legend(s, names, x0, y0):
    for k, name in enumerate(names):
        y = y0 + 14 * k
        s.append(f'<rect x="{x0}" y="{y - 8}" width="10" height="10" fill="{COLORS[k % len(COLORS)]}"/>')
        s.append(f'<text x="{x0 + 14}" y="{y + 1}">{esc(name)}</text>')


def line_chart(series, title_text, xlabel, ylabel, logy=False, xzero=False, w=620, h=300):
    """series: [(name, [(x, y), ...]), ...] drawn as lines with dots."""
    ml, mr, mt, mb = 58, 150, 24, 36
    xs = [p[0] for _, pts in series for p in pts]
    ys = [p[1] for _, pts in series for p in pts]
    x = Axis(xs, ml, w - mr, zero=xzero)
    y = Axis(ys, h - mb, mt, log=logy)
    s = svg_frame(w, h, title_text, x, y, xlabel, ylabel, ml, mt, mb)
    for k, (name, pts) in enumerate(series):
        c = COLORS[k % len(COLORS)]
        pts = [(px, py) for px, py in pts if py is not None and (py > 0 or not logy)]
        if len(pts) > 1:
            s.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="'
                     + " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in pts) + '"/>')
        for px, py in pts:
            s.append(f'<circle cx="{x(px):.1f}" cy="{y(py):.1f}" r="2.5" fill="{c}"/>')
    legend(s, [n for n, _ in series], w - mr + 10, mt + 10)
    s.append("</svg>")
    return "\n".join(s)


def bar_chart(groups, keys, title_text, xlabel, w=620):
    """Horizontal bars on a log axis: groups = [(name, {key: value})], one bar per key."""
    ml, mr, mt, mb, bh = 200, 110, 24, 36, 7
    h = mt + mb + len(groups) * (len(keys) * bh + 10)
    vals = [v.get(k) for _, v in groups for k in keys]
    x = Axis(vals, ml, w - mr, log=True)
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
         f'font-family="sans-serif" font-size="11">',
         f'<text x="{w / 2:.0f}" y="14" text-anchor="middle" font-size="13" font-weight="bold">{esc(title_text)}</text>']
    for t in x.ticks:
        s.append(f'<line x1="{x(t):.1f}" y1="{mt}" x2="{x(t):.1f}" y2="{h - mb}" stroke="#ddd"/>')
        s.append(f'<text x="{x(t):.1f}" y="{h - mb + 14}" text-anchor="middle">{esc(tick_label(t))}</text>')
    y = mt + 4
    for name, v in groups:
        s.append(f'<text x="{ml - 6}" y="{y + len(keys) * bh / 2 + 4:.0f}" text-anchor="end">{esc(name)}</text>')
        for k, key in enumerate(keys):
            val = v.get(key)
            if val and val > 0:
                s.append(f'<rect x="{ml}" y="{y}" width="{max(x(val) - ml, 1):.1f}" height="{bh - 1}" '
                         f'fill="{COLORS[k % len(COLORS)]}"><title>{esc(name)} {esc(key)}: {esc(num(val))} ms</title></rect>')
            y += bh
        y += 10
    s.append(f'<text x="{(ml + w - mr) / 2:.0f}" y="{h - 6}" text-anchor="middle">{esc(xlabel)}</text>')
    legend(s, keys, w - mr + 10, mt + 10)
    s.append("</svg>")
    return "\n".join(s)


def ratio_chart(items, title_text, w=620):
    """items = [(name, (median, min, max))]: a dot at the median, a line over min..max."""
    ml, mr, mt, mb, rh = 260, 30, 24, 36, 18
    h = mt + mb + rh * len(items)
    vals = [v for _, s in items for v in s] + [1.0]
    x = Axis([min(vals) * 0.95, max(vals) * 1.05], ml, w - mr, zero=False)
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
         f'font-family="sans-serif" font-size="11">',
         f'<text x="{w / 2:.0f}" y="14" text-anchor="middle" font-size="13" font-weight="bold">{esc(title_text)}</text>']
    for t in x.ticks:
        s.append(f'<line x1="{x(t):.1f}" y1="{mt}" x2="{x(t):.1f}" y2="{h - mb}" stroke="#eee"/>')
        s.append(f'<text x="{x(t):.1f}" y="{h - mb + 14}" text-anchor="middle">{t:g}</text>')
    s.append(f'<line x1="{x(1.0):.1f}" y1="{mt}" x2="{x(1.0):.1f}" y2="{h - mb}" stroke="#444" stroke-dasharray="4 3"/>')
    for k, (name, (med, lo, hi)) in enumerate(items):
        cy = mt + rh * k + rh / 2
        s.append(f'<text x="{ml - 6}" y="{cy + 4:.0f}" text-anchor="end">{esc(name)}</text>')
        s.append(f'<line x1="{x(lo):.1f}" y1="{cy:.1f}" x2="{x(hi):.1f}" y2="{cy:.1f}" stroke="{COLORS[0]}" stroke-width="2"/>')
        s.append(f'<circle cx="{x(med):.1f}" cy="{cy:.1f}" r="4" fill="{COLORS[1]}">'
                 f'<title>{esc(name)}: {med:.3f} ({lo:.3f}..{hi:.3f})</title></circle>')
    s.append(f'<text x="{(ml + w - mr) / 2:.0f}" y="{h - 6}" text-anchor="middle">ratio B / A (1 = same)</text>')
    s.append("</svg>")
    return "\n".join(s)


# ---- report.html --------------------------------------------------------------------

def table(header, rows):
    s = ["<table>", "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        s.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>")
    s.append("</table>")
    return "\n".join(s)


def render_html(runs, limits, meta, summary_text, headline):
    g = group(runs)
    configs = next((v.split(",") for k, v in meta if k == "configs"), None) or list(g)
    multi = len(g) > 1
    parts = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
             '<title>sluice benchmark report</title>',
             '<style>body{font-family:sans-serif;margin:1.5em;max-width:1300px}'
             'table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}'
             'td:first-child,th:first-child{text-align:left}pre{background:#f6f6f6;padding:8px;font-size:12px;overflow-x:auto}'
             '.charts svg{margin:4px;border:1px solid #eee}</style>',
             '</head>', '<body>', '<h1>sluice benchmark report</h1>']
    when = dict(meta).get("date")
    if when:
        parts.append(f"<p>{esc(when)}: {esc(dict(meta).get('mode', ''))} run. "
                     "MB = MiB of record values; latencies in ms; ratios are per round, then median (min..max).</p>")
    parts.append("<h2>Summary</h2>")
    if headline:
        parts.append(table(["figure", "value"], headline))
    if limits:
        parts.append("<h3>Limits of this machine (same run)</h3>")
        parts.append(table(["metric", "value", "unit", "how"],
                           [[r.get("metric"), r.get("value"), r.get("unit"), r.get("detail")] for r in limits]))

    cmp = compare(g, configs)
    if cmp:
        a, b = configs[0], configs[1]
        parts.append(f"<h2>Comparison: B = {esc(b)} over A = {esc(a)}</h2>")
        parts.append('<div class="charts">')
        for key, what in (("mb_per_s", "throughput"), ("p99_ms", "p99 latency")):
            items = [(title(n), s) for n, k, s, _ in cmp if k == key]
            if items:
                parts.append(ratio_chart(items, f"{what}: {b} / {a}"))
        parts.append("</div>")
        parts.append(table(["workload", "figure", "B/A median", "min", "max", "rounds"],
                           [[title(n), k, f"{s[0]:.3f}", f"{s[1]:.3f}", f"{s[2]:.3f}", nr] for n, k, s, nr in cmp]))

    opens = open_loop(g)
    if opens:
        parts.append("<h2>Latency vs offered load (open loop)</h2>")
        parts.append('<div class="charts">')
        series = []
        for cfg, pts in opens.items():
            tag = f"{cfg} " if multi else ""
            series.append((f"{tag}p50", [(r.offered, r.get("p50_ms")) for r in pts]))
            series.append((f"{tag}p99", [(r.offered, r.get("p99_ms")) for r in pts]))
        parts.append(line_chart(series, "latency vs offered load", "offered records/s", "ms (log)", logy=True, xzero=True))
        ach = [(f"{cfg} achieved" if multi else "achieved", [(r.offered, r.get("rec_per_s")) for r in pts])
               for cfg, pts in opens.items()]
        parts.append(line_chart(ach, "achieved vs offered", "offered records/s", "records/s", xzero=True))
        parts.append("</div>")

    parts.append("<h2>Latency percentiles per workload (median over rounds)</h2>")
    bars = []
    for cfg in configs:
        for name in name_order(g.get(cfg, {})):
            rs = [r for r in g[cfg][name] if r.summary]
            if rs:
                v = {k: spread([r.get(k + "_ms") for r in rs])[0] if spread([r.get(k + "_ms") for r in rs]) else None
                     for k in ("p50", "p95", "p99", "p999")}
                bars.append((f"{cfg + ': ' if multi else ''}{name}", v))
    if bars:
        parts.append('<div class="charts">' + bar_chart(bars, ["p50", "p95", "p99", "p999"],
                                                         "latency percentiles", "ms (log scale)") + "</div>")
    else:
        parts.append("<p>No summary rows.</p>")

    parts.append("<h2>Throughput over time (interval rows)</h2>")
    charts = []
    names = name_order(list(dict.fromkeys(n for cfg in g for n in g[cfg])))
    for name in names:
        series = []
        for cfg in configs:
            for r in g.get(cfg, {}).get(name, []):
                pts = [(fval(i, "t_s"), fval(i, "mb_per_s")) for i in r.intervals]
                pts = [p for p in pts if p[0] is not None]
                if pts:
                    series.append((f"{cfg + ' ' if multi else ''}r{r.round}", pts))
        if series:
            charts.append(line_chart(series, title(name), "seconds", "MB/s", xzero=True, w=460, h=240))
    parts.append('<div class="charts">' + "\n".join(charts) + "</div>" if charts else "<p>No interval rows.</p>")

    parts.append("<h2>Every run</h2>")
    rows = []
    for cfg in configs:
        for name in name_order(g.get(cfg, {})):
            for r in g[cfg][name]:
                rows.append([r.label, r.config, r.name, r.round, num(r.get("rec_per_s")), num(r.get("mb_per_s")),
                             num(r.get("p50_ms")), num(r.get("p99_ms")), num(r.get("p999_ms")), num(r.get("max_ms")),
                             num(r.get("errors")), r.info.get("broker_cpu_pct", ""), r.info.get("other_cpu_pct", ""),
                             r.info.get("rc", "")])
    parts.append(table(["label", "config", "workload", "round", "rec/s", "MB/s", "p50", "p99", "p99.9", "max",
                        "errors", "broker CPU %", "other CPU %", "exit"], rows))
    parts.append("<h2>summary.txt</h2>")
    parts.append(f"<pre>{esc(summary_text)}</pre>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def write_report(results, limits_path, runs_path, meta_path, html_out, summary_out):
    runs = load(results, runs_path)
    limits = read_csv(limits_path)
    meta = read_meta(meta_path)
    text, headline = summarise(runs, limits, meta)
    with open(summary_out, "w") as f:
        f.write(text)
    with open(html_out, "w") as f:
        f.write(render_html(runs, limits, meta, text, headline))
    return text


# ---- self-test ----------------------------------------------------------------------

VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "track", "wbr"}


def check_html(path):
    """Tags balanced, at least one <svg>, every SVG well-formed XML. Returns the SVG count."""
    import html.parser
    import xml.etree.ElementTree as ET

    class P(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack, self.errors = [], []

        def handle_starttag(self, tag, attrs):
            if tag not in VOID:
                self.stack.append(tag)

        def handle_startendtag(self, tag, attrs):
            pass

        def handle_endtag(self, tag):
            if not self.stack or self.stack[-1] != tag:
                self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            else:
                self.stack.pop()

    text = open(path).read()
    p = P()
    p.feed(text)
    p.close()
    assert not p.errors and not p.stack, f"{path}: unbalanced tags: {p.errors[:3]} open {p.stack[:5]}"
    svgs = re.findall(r"<svg\b.*?</svg>", text, re.S)
    for s in svgs:
        ET.fromstring(s)  # raises on malformed SVG
    return len(svgs)


def self_test():
    hdr = ("label,workload,mode,kind,t_s,records,bytes,rec_per_s,mb_per_s,avg_ms,p50_ms,p95_ms,p99_ms,p999_ms,"
           "max_ms,errors,offered_rate,commit_p50_ms,commit_p99_ms,broker_cpu_ms_per_mib")
    runs_hdr = ("label,config,name,round,tool,workload,mode,size,offered_rate,rc,wall_s,broker_cpu_pct,"
                "broker_disk_mb_per_s,other_cpu_pct,client_cpu_s,commits,aborts,checksum,command")

    def rows(label, wl, mode, mb, p50, offered=0.0, intervals=3, cpu_ms=""):
        out = []
        for t in range(1, intervals + 1):
            out.append(f"{label},{wl},{mode},interval,{t},1000,1024000,{mb * 1024:.1f},{mb * (0.9 + t / 20):.3f},"
                       f"{p50},{p50},{p50 * 2},{p50 * 3},{p50 * 4},{p50 * 5},0,{offered},,,")
        out.append(f"{label},{wl},{mode},summary,{intervals},3000,3072000,{mb * 1024:.1f},{mb:.3f},"
                   f"{p50},{p50},{p50 * 2},{p50 * 3},{p50 * 4},{p50 * 5},0,{offered},1.5,2.5,{cpu_ms}")
        return out

    def write(d, name, lines):
        with open(os.path.join(d, name), "w") as f:
            f.write("\n".join(lines) + "\n")

    # (config, name, workload, mode, MB/s per round, p50 ms, offered)
    std = [("sluice", "produce-plain-1k", "produce", "plain", [100, 110, 90], 50, 0),
           ("sluice", "produce-idem-1k", "produce", "idempotent", [90, 88, 99], 55, 0),
           ("sluice", "produce-txn-1k", "produce", "transactional", [45, 44, 49.5], 60, 0),
           ("sluice", "consume-uncommitted", "consume", "plain", [400], 2, 0),
           ("sluice", "rdk-produce-1k", "produce", "plain", [None, None, 50], 300, 0),
           ("sluice", "open-50", "produce", "idempotent", [45], 3, 46080),
           ("sluice", "open-25", "produce", "idempotent", [22], 1.5, 23040)]
    with tempfile.TemporaryDirectory() as d:
        # 1. a standard run: limits, runs.csv, open loop; ratios must come out right.
        res, rr = [hdr], [runs_hdr]
        for cfg, name, wl, mode, mbs, p50, off in std:
            for k, mb in enumerate(mbs, 1):
                if mb is None:
                    continue
                label = f"{cfg}.{name}.r{k}"
                res += rows(label, wl, mode, mb, p50, off, cpu_ms=(3 + k if name == "produce-idem-1k" else ""))
                rr.append(f"{label},{cfg},{name},{k},sluice-bench,{wl},{mode},1024,{off},0,12,90,300,5,8,,,,\"x y\"")
        rr.append("sluice.consume-committed.r3,sluice,consume-committed,3,sluice-bench,consume,plain,0,0,1,1,,,,,,,,\"x\"")
        write(d, "results.csv", res)
        write(d, "runs.csv", rr)
        write(d, "limits.csv", ["metric,value,unit,detail", "disk_seq_write,500,MB/s,dd",
                                "disk_buffered_write,250,MB/s,dd", "disk_prealloc_write,300,MB/s,dd",
                                "fdatasync_rate,2000,writes/s,dd", "fdatasync_ms,0.5,ms,x", "loopback_tcp,4000,MB/s,x"])
        write(d, "meta.txt", ["date: 2026-01-01 00:00:00 UTC", "mode: standard"])
        text = write_report([os.path.join(d, "results.csv")], os.path.join(d, "limits.csv"),
                            os.path.join(d, "runs.csv"), os.path.join(d, "meta.txt"),
                            os.path.join(d, "report.html"), os.path.join(d, "summary.txt"))
        # idempotent/plain per round: 0.9, 0.8, 1.1 -> median 0.900 (0.800..1.100)
        assert "idempotent / plain (MB/s): 0.900 (0.800..1.100)" in text, text
        # transactional/idempotent: 0.5 each round
        assert "transactional / idempotent (MB/s): 0.500" in text, text
        # librdkafka ran once (round 3), against the median plain figure: 50 / 100
        assert "librdkafka / sluice-bench median, plain 1 KiB (MB/s): 0.500" in text, text
        # durable / disk: 100/500, 110/500, 90/500
        assert "0.200 (0.180..0.220) of the disk's sequential write" in text, text
        assert "consume read_committed: no result (1 failed run(s))" in text, text
        assert "disk sequential write 500.0 MB/s; buffered write 250.0 MB/s; buffered write into a preallocated " \
               "file 300.0 MB/s" in text, text
        # sluice-bench --broker-pid: 4, 5, 6 ms per MiB over the rounds
        assert re.search(r"idempotent.*broker CPU 90 %, broker CPU per MB 5.00 ms \(4.00..6.00\)", text), text
        assert re.search(r"offered\s+23,040 rec/s", text), text
        n = check_html(os.path.join(d, "report.html"))
        assert n >= 4, f"standard report has {n} SVGs"
        assert "latency vs offered load" in open(os.path.join(d, "report.html")).read()

    with tempfile.TemporaryDirectory() as d:
        # 2. a comparison: B is 2x A in round 1, 3x in round 2; labels only (no runs.csv).
        res = [hdr]
        for k, (ma, mb) in enumerate([(100, 200), (100, 300)], 1):
            res += rows(f"fsync.produce-idem-1k.r{k}", "produce", "idempotent", ma, 10, cpu_ms=8)
            res += rows(f"nofsync.produce-idem-1k.r{k}", "produce", "idempotent", mb, 5, cpu_ms=2)
        write(d, "results.csv", res)
        write(d, "meta.txt", ["date: 2026-01-01 00:00:00 UTC", "mode: compare", "configs: fsync,nofsync"])
        text = write_report([os.path.join(d, "results.csv")], None, None, os.path.join(d, "meta.txt"),
                            os.path.join(d, "report.html"), os.path.join(d, "summary.txt"))
        assert "mb_per_s: 2.500 (2.000..3.000)  [2]" in text, text
        assert "p50_ms: 0.500" in text, text
        assert "broker_cpu_ms_per_mib: 0.250  [2]" in text, text
        assert check_html(os.path.join(d, "report.html")) >= 3
        assert "Comparison: B = nofsync over A = fsync" in open(os.path.join(d, "report.html")).read()

    with tempfile.TemporaryDirectory() as d:
        # 3. the least there can be: one summary row of a label with no structure,
        #    and a results.csv with a header only; no interval rows, no open loop.
        write(d, "results.csv", [hdr, "mytest,produce,plain,summary,5,10,10240,2.0,0.002,1,1,1,1,1,1,0,0,,,"])
        write(d, "empty.csv", [hdr])
        text = write_report([os.path.join(d, "results.csv"), os.path.join(d, "empty.csv")], None, None, None,
                            os.path.join(d, "report.html"), os.path.join(d, "summary.txt"))
        assert "mytest: 2.00 rec/s" in text, text
        assert check_html(os.path.join(d, "report.html")) >= 1
        write(d, "results.csv", [hdr])
        write_report([os.path.join(d, "results.csv")], None, None, None,
                     os.path.join(d, "report.html"), os.path.join(d, "summary.txt"))
        check_html(os.path.join(d, "report.html"))
    print("report.py self-test: ok")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    results, opts, args = [], {}, argv[1:]
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-h", "--help"):
            print(__doc__)
            return 0
        if a in ("--csv", "--limits", "--runs", "--meta", "--html", "--summary"):
            if i + 1 >= len(args):
                print(f"report.py: {a} needs a value", file=sys.stderr)
                return 2
            if a == "--csv":
                results.append(args[i + 1])
            else:
                opts[a] = args[i + 1]
            i += 2
        elif not a.startswith("-") and "dir" not in opts:
            opts["dir"] = a
            i += 1
        else:
            print(f"report.py: unexpected argument {a} (--help)", file=sys.stderr)
            return 2
    d = opts.get("dir")
    if d:
        results = results or [os.path.join(d, "results.csv")]
        for k, f in (("--limits", "limits.csv"), ("--runs", "runs.csv"), ("--meta", "meta.txt"),
                     ("--html", "report.html"), ("--summary", "summary.txt")):
            opts.setdefault(k, os.path.join(d, f))
    if not results:
        print(__doc__, file=sys.stderr)
        return 2
    for f in results:
        if not os.path.exists(f):
            print(f"report.py: {f}: no such file", file=sys.stderr)
            return 1
    write_report(results, opts.get("--limits"), opts.get("--runs"), opts.get("--meta"),
                 opts.get("--html", "report.html"), opts.get("--summary", "summary.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
