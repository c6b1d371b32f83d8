#!/usr/bin/env python3
"""eosc_run.py - one run of the randomized exactly-once checker (issue 10).

    eosc_run.py --sluiced PATH --driver PATH [--dump SLUICE_DUMP] [--cores N] [--faults|--no-faults]
                [--duration S] [--min-txns N] [--seed N] [--producers N] [--copiers N]
                [--abort-pct N] [--hold-ms-max N] [--work DIR] [--keep]

Starts sluiced (--cores N) on a free port with a fresh data dir, creates two
input topics of 3 partitions (a, b) and the copier's output (o, 6
partitions), and runs for --duration seconds (longer, up to 3 times that,
until the producers ended --min-txns transactions, so that a slow machine
still gets the workload's weight): --producers transactional
producers (eosc_driver produce, transactional ids p0..), and --copiers
consume-transform-produce copiers (eosc_driver copy, ids c0.., one group)
copying a and b to o. A client that ends on its own (a fatal error) is
replaced by a new instance with the same transactional id. With --faults the
runner also, at random times:
  kill      SIGKILL a producer or copier and start a new instance;
  zombie    SIGSTOP one, start a new instance with its transactional id, wait
            for its init_transactions, then SIGCONT the old one: whatever it
            still tries must be fenced;
  pause     SIGSTOP a client for 1-12 s (past the copier's session timeout
            sometimes), then SIGCONT it;
  broker    SIGKILL the broker and restart it on the same port and data.
Each kind comes once first (kill and zombie also on the copier), in a random
order, so that even a short run has them all; then they are drawn at random.
Then the end: every stopped client is continued, producers get SIGTERM (they
finish their open transaction), instances that did not exit cleanly get a
"close" instance (init_transactions: fences and aborts what they left), the
copiers are told to finish (SIGUSR1: until the group's committed offsets are
the input's end), and everything is read back with read_committed and
read_uncommitted (eosc_driver read); with --dump, sluice-dump lists the
batches and transaction markers of every partition (markers.txt), so that
the checker can tell a wrong log from a right log served wrong.
eosc_check.py judges it; the report goes to stdout.

Every random choice comes from --seed (default: EOSC_SEED or a random one),
including the seeds of the clients; the timing of a machine is not
reproducible, so a replay repeats the schedule, not the interleaving.

Exit status 0: every class 0; 1: an anomaly (or the broker crashed); the
seed and a command to replay it are printed, and the work dir (client logs,
read-backs, broker log and data) is kept. 2: setup error.
Locality: a test program, one thread.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eosc_check  # noqa: E402

INPUTS = [('a', 3), ('b', 3)]
OUTPUT = ('o', 6)
GROUP = 'eosc-copiers'

START_WAIT_S = 60        # broker start-up (recovery after a SIGKILL takes a while on a busy machine)
STOP_WAIT_S = 30         # broker SIGTERM to exit
INIT_WAIT_S = 90         # a replacement's init_transactions in a zombie fault
TERM_WAIT_S = 120        # a producer's last transaction after SIGTERM
CLOSE_WAIT_S = 120       # a close instance
FINISH_WAIT_S = 240      # a copier's catching up at the end
READ_SETTLE_S = 60       # the reader waits this long for the LSO to reach the high watermark
READ_WAIT_S = 300
RESTARTS_MAX = 200       # client instances started, beyond the first ones: a crash loop, not faults
RESTARTS_PER_MIN = 30    # ... plus this many per minute of --duration (faults restart ~7 a minute)
TXN_TIMEOUT_MS = 30000
MIN_TXNS_STRETCH = 3     # --min-txns may stretch the workload to this many times --duration


def log(msg):
    print('[%s eosc] %s' % (time.strftime('%H:%M:%S'), msg), file=sys.stderr, flush=True)


def port_free(p):
    with socket.socket() as s:
        s.settimeout(1)
        try:
            s.connect(('127.0.0.1', p))
            return False
        except OSError:
            pass
    with socket.socket() as s:
        try:
            s.bind(('127.0.0.1', p))
            return True
        except OSError:
            return False


def pick_port(rng):
    # 12000..19999: below lib.sh's ranges and the kernel's ephemeral ports (32768 up),
    # where a client's outgoing connection could hold the port.
    base = 12000 + rng.randrange(0, 7500)
    for p in range(base, base + 500):
        if port_free(p):
            return p
    raise RuntimeError('no free port near %d' % base)


class Broker:
    def __init__(self, exe, work, port, cores):
        self.exe, self.port, self.cores = exe, port, cores
        self.data = os.path.join(work, 'data')
        self.logpath = os.path.join(work, 'broker.log')
        self.proc = None
        self.crashes = []     # exits we did not cause

    def start(self):
        for attempt in range(3):
            with open(self.logpath, 'ab') as f:
                f.write(b'=== start\n')
                base = f.tell()
            out = open(self.logpath, 'ab')
            self.proc = subprocess.Popen(
                [self.exe, '--listen', '127.0.0.1:%d' % self.port, '--data', self.data,
                 '--cores', str(self.cores), '--log-level', 'info'],
                stdout=out, stderr=subprocess.STDOUT)
            out.close()
            deadline = time.monotonic() + START_WAIT_S
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                with open(self.logpath, 'rb') as f:
                    f.seek(base)
                    if b'listening on' in f.read():
                        return
                time.sleep(0.1)
            rc = self.proc.poll()
            if rc is None:
                self.proc.kill()
                self.proc.wait()
                rc = 'no listen in %ds' % START_WAIT_S
            self.crashes.append('start failed (%s)' % rc)
            log('broker start failed (%s); retrying' % rc)
            time.sleep(1)
        raise RuntimeError('broker does not start: %s' % self.crashes)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check(self):
        """A broker that exited without being told is a finding; restart it to go on."""
        if self.proc is not None and self.proc.poll() is not None:
            self.crashes.append('exited with status %s' % self.proc.returncode)
            log('BROKER EXITED with status %s; restarting' % self.proc.returncode)
            self.proc = None
            self.start()

    def kill9(self):
        self.check()
        self.proc.kill()
        self.proc.wait()
        with open(self.logpath, 'ab') as f:
            f.write(b'=== SIGKILL\n')
        self.proc = None

    def stop(self):
        if not self.alive():
            self.check()
        self.proc.terminate()
        try:
            rc = self.proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = 'no exit in %ds' % STOP_WAIT_S
        if rc != 0:
            self.crashes.append('SIGTERM: %s' % rc)
        self.proc = None


class Role:
    """One transactional id (a producer or a copier) and its instances."""

    def __init__(self, run, kind, tid):
        self.run, self.kind, self.tid = run, kind, tid
        self.next_inst = 0
        self.cur = None          # the current instance's Popen
        self.old = []            # superseded instances (zombies, killed)

    def start(self, cmd='produce'):
        r = self.run
        inst = self.next_inst
        self.next_inst += 1
        prefix = {'produce': 'prod', 'copy': 'copy', 'close': 'close'}[cmd]
        name = '%s-%s-%d' % (prefix, self.tid, inst)
        args = [r.args.driver, cmd, '--bootstrap', r.bootstrap, '--txn-id', self.tid,
                '--instance', str(inst), '--log', os.path.join(r.work, name + '.log'),
                '--seed', str(r.rng.getrandbits(63)), '--txn-timeout-ms', str(TXN_TIMEOUT_MS)]
        if cmd == 'produce':
            args += ['--topics', ','.join('%s:%d' % t for t in INPUTS), '--abort-pct', str(r.args.abort_pct),
                     '--txn-max', '50', '--hold-ms-max', str(r.args.hold_ms_max)]
        elif cmd == 'copy':
            args += ['--topics', ','.join('%s:%d' % t for t in INPUTS), '--out', OUTPUT[0], '--group', GROUP,
                     '--abort-pct', str(r.args.abort_pct // 2), '--txn-max', '200']
        with open(os.path.join(r.work, name + '.err'), 'wb') as err:
            p = subprocess.Popen(args, stdout=err, stderr=subprocess.STDOUT)
        p.eosc_name = name
        r.procs.append(p)
        if cmd != 'close':
            if self.cur is not None:
                self.old.append(self.cur)
            self.cur = p
        return p

    def restart(self):
        self.run.restarts += 1
        most = RESTARTS_MAX + RESTARTS_PER_MIN * self.run.args.duration // 60
        if self.run.restarts > most:
            raise RuntimeError('more than %d client restarts' % most)
        return self.start(self.kind)


def log_has(path, word):
    try:
        with open(path) as f:
            return any(l.split()[1:2] == [word] for l in f if l.endswith('\n'))
    except FileNotFoundError:
        return False


class Run:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = args.work or tempfile.mkdtemp(prefix='sluice-eosc-')
        os.makedirs(self.work, exist_ok=True)
        self.port = pick_port(self.rng)
        self.bootstrap = '127.0.0.1:%d' % self.port
        self.broker = Broker(args.sluiced, self.work, self.port, args.cores)
        self.procs = []
        self.stopped = set()
        self.restarts = 0
        self.faults = {}
        self.first_faults = [('kill', False), ('zombie', False), ('pause', False), ('broker', False),
                             ('kill', True), ('zombie', True)]
        self.rng.shuffle(self.first_faults)
        self.producers = [Role(self, 'produce', 'p%d' % i) for i in range(args.producers)]
        self.copiers = [Role(self, 'copy', 'c%d' % i) for i in range(args.copiers)]

    def roles(self):
        return self.producers + self.copiers

    def driver(self, *a, timeout=READ_WAIT_S):
        return subprocess.run([self.args.driver] + list(a), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)

    def tick(self, seconds):
        """Sleeps, meanwhile replacing clients that ended on their own and
        noticing a broker that died."""
        end = time.monotonic() + seconds
        while True:
            self.broker.check()
            for role in self.roles():
                p = role.cur
                if p is not None and p not in self.stopped and p.poll() is not None:
                    log('%s exited (status %s); new instance' % (p.eosc_name, p.returncode))
                    role.restart()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.2, left))

    def sig(self, p, s):
        try:
            p.send_signal(s)
        except ProcessLookupError:
            pass

    def fault(self):
        # Each kind once first (in a random order, the copier's turn too), so
        # that even a short run has them all; then at random.
        if self.first_faults:
            kind, on_copier = self.first_faults.pop()
        else:
            kind = self.rng.choice(['kill', 'kill', 'zombie', 'zombie', 'pause', 'pause', 'broker', 'broker'])
            on_copier = self.rng.random() < 0.3
        role = self.rng.choice(self.copiers if on_copier and self.copiers else self.producers)
        self.faults[kind] = self.faults.get(kind, 0) + 1
        p = role.cur
        if kind == 'broker':
            down = self.rng.uniform(0.1, 2.0)
            log('fault: broker SIGKILL, down %.1f s' % down)
            self.broker.kill9()
            time.sleep(down)
            self.broker.start()
        elif p is None or p.poll() is not None:
            return
        elif kind == 'kill':
            log('fault: SIGKILL %s' % p.eosc_name)
            p.kill()
            p.wait()
            role.restart()
        elif kind == 'pause':
            t = self.rng.uniform(1, 12)
            log('fault: SIGSTOP %s for %.1f s' % (p.eosc_name, t))
            self.sig(p, signal.SIGSTOP)
            self.stopped.add(p)
            self.tick(t)
            self.sig(p, signal.SIGCONT)
            self.stopped.discard(p)
        elif kind == 'zombie':
            self.sig(p, signal.SIGSTOP)
            self.stopped.add(p)
            q = role.restart()
            qlog = os.path.join(self.work, q.eosc_name + '.log')
            deadline = time.monotonic() + INIT_WAIT_S
            while not log_has(qlog, 'init_ok') and q.poll() is None and time.monotonic() < deadline:
                self.tick(0.2)
            t = self.rng.uniform(0.5, 4)
            log('fault: zombie %s stopped, %s %s, %s continued %.1f s later' %
                (p.eosc_name, q.eosc_name, 'initialized' if log_has(qlog, 'init_ok') else 'NOT initialized',
                 p.eosc_name, t))
            self.tick(t)
            self.sig(p, signal.SIGCONT)
            self.stopped.discard(p)

    def txns_ended(self):
        """Producer transactions that asked for their end so far (their logs)."""
        n = 0
        for name in os.listdir(self.work):
            if name.startswith('prod-') and name.endswith('.log'):
                with open(os.path.join(self.work, name), 'rb') as f:
                    data = f.read()
                n += data.count(b' commit_req ') + data.count(b' abort_req ')
        return n

    def wait_exit(self, procs, seconds, what):
        deadline = time.monotonic() + seconds
        for p in procs:
            left = deadline - time.monotonic()
            try:
                p.wait(max(left, 0.1))
            except subprocess.TimeoutExpired:
                log('%s: %s still running after %ds: SIGKILL' % (what, p.eosc_name, seconds))
                p.kill()
                p.wait()

    def finish(self):
        for p in list(self.stopped):
            self.sig(p, signal.SIGCONT)
        self.stopped.clear()
        self.broker.check()
        # Producers end after their open transaction; superseded instances too.
        prods = [r.cur for r in self.producers] + [p for r in self.roles() for p in r.old]
        for p in prods:
            self.sig(p, signal.SIGTERM)
        self.wait_exit(prods, TERM_WAIT_S, 'producers')
        # What an instance left open (killed, fatal error) is aborted by the
        # next one of its id: a close instance for each whose last one did not exit cleanly.
        closers = [r.start('close') for r in self.producers if r.cur.returncode != 0]
        self.wait_exit(closers, CLOSE_WAIT_S, 'close')
        # The copiers catch up with the input, then exit ("done").
        deadline = time.monotonic() + FINISH_WAIT_S
        for r in self.copiers:
            self.sig(r.cur, signal.SIGUSR1)
        while time.monotonic() < deadline:
            self.broker.check()
            running = False
            for r in self.copiers:
                p = r.cur
                if p.poll() is None:
                    running = True
                elif p.returncode != 0 or not log_has(os.path.join(self.work, p.eosc_name + '.log'), 'done'):
                    log('%s exited (status %s) while finishing; new instance' % (p.eosc_name, p.returncode))
                    time.sleep(0.5)
                    q = r.restart()
                    time.sleep(0.5)
                    self.sig(q, signal.SIGUSR1)
                    running = True
            if not running:
                break
            time.sleep(0.2)
        else:
            log('copiers did not finish in %ds' % FINISH_WAIT_S)
        for r in self.copiers:
            if r.cur.poll() is None:
                r.cur.kill()
                r.cur.wait()

    def read_back(self):
        topics = ','.join('%s:%d' % t for t in INPUTS + [OUTPUT])
        procs = []
        for iso, f in (('committed', 'rc.txt'), ('uncommitted', 'ru.txt')):
            with open(os.path.join(self.work, 'read-%s.err' % iso), 'wb') as err:
                procs.append(subprocess.Popen(
                    [self.args.driver, 'read', '--bootstrap', self.bootstrap, '--topics', topics,
                     '--isolation', iso, '--out', os.path.join(self.work, f), '--settle-s', str(READ_SETTLE_S)],
                    stdout=err, stderr=subprocess.STDOUT))
        for p in procs:
            rc = p.wait(READ_WAIT_S)
            if rc != 0:
                raise RuntimeError('reader exited %d' % rc)

    def dump_markers(self):
        """The log's batches and markers (sluice-dump), so that the checker
        can tell a wrong log from a right log served wrong."""
        lines = []
        for topic, parts in INPUTS + [OUTPUT]:
            for p in range(parts):
                r = subprocess.run([self.args.dump, os.path.join(self.broker.data, '%s-%d' % (topic, p))],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=READ_WAIT_S,
                                   check=False)
                if r.returncode != 0:
                    raise RuntimeError('sluice-dump %s-%d exited %d' % (topic, p, r.returncode))
                lines += eosc_check.markers_from_dump(topic, p, r.stdout.decode(errors='replace').splitlines())
        with open(os.path.join(self.work, 'markers.txt'), 'w') as f:
            f.write(''.join(l + '\n' for l in lines))

    def replay(self):
        a = self.args
        return ('python3 %s --sluiced %s --driver %s%s --cores %d %s --duration %d --min-txns %d --producers %d '
                '--copiers %d --abort-pct %d --hold-ms-max %d --seed %d' %
                (os.path.abspath(__file__), os.path.abspath(a.sluiced), os.path.abspath(a.driver),
                 ' --dump ' + os.path.abspath(a.dump) if a.dump else '', a.cores,
                 '--faults' if a.faults else '--no-faults', a.duration, a.min_txns, a.producers, a.copiers,
                 a.abort_pct, a.hold_ms_max, a.seed))

    def main(self):
        a = self.args
        log('seed %d, cores %d, faults %s, %d s, work dir %s, port %d' %
            (a.seed, a.cores, 'on' if a.faults else 'off', a.duration, self.work, self.port))
        self.broker.start()
        r = self.driver('create', '--bootstrap', self.bootstrap, '--topics',
                        ','.join('%s:%d' % t for t in INPUTS + [OUTPUT]))
        if r.returncode != 0:
            raise RuntimeError('create topics: %s' % r.stdout.decode(errors='replace'))
        for role in self.copiers:
            role.start('copy')
        for role in self.producers:
            role.start('produce')
        start = time.monotonic()
        end, cap = start + a.duration, start + a.duration * MIN_TXNS_STRETCH
        while True:
            now = time.monotonic()
            if now >= end and (now >= cap or self.txns_ended() >= a.min_txns):
                break
            self.tick(min(self.rng.uniform(0.5, 3.0), max(end - now, 0.5)))
            if a.faults and time.monotonic() < cap:
                self.fault()
        log('workload: %.0f s, %d producer transactions' % (time.monotonic() - start, self.txns_ended()))
        log('workload over (faults: %s; %d client restarts); finishing' %
            (', '.join('%s %d' % kv for kv in sorted(self.faults.items())) or 'none', self.restarts))
        self.finish()
        log('reading back')
        self.read_back()
        self.broker.stop()
        if a.dump:
            self.dump_markers()
        with open(os.path.join(self.work, 'run.json'), 'w') as f:
            json.dump({'seed': a.seed, 'cores': a.cores, 'faults': a.faults, 'duration': a.duration,
                       'inputs': dict(INPUTS), 'output': OUTPUT[0] if self.copiers else None,
                       'replay': self.replay()}, f, indent=1)
        res = eosc_check.check_dir(self.work)
        print(res.report())
        if self.broker.crashes:
            res.counts['broker_crash'] = len(self.broker.crashes)
            print('broker_crash       %d' % len(self.broker.crashes))
            for c in self.broker.crashes[:eosc_check.EXAMPLES_MAX]:
                print('    ' + c)
        bad = ' '.join('%s=%d' % kv for kv in res.counts.items() if kv[1])
        log('seed %d, cores %d, faults %s: %s' % (a.seed, a.cores, 'on' if a.faults else 'off',
                                                  'anomalies ' + bad if bad else 'every class 0'))
        return not bad


def parse_args(argv):
    ap = argparse.ArgumentParser(description='randomized exactly-once checker run')
    ap.add_argument('--sluiced', required=True)
    ap.add_argument('--driver', required=True)
    ap.add_argument('--dump', default=None, help='sluice-dump: the log\'s markers go to the checker too')
    ap.add_argument('--cores', type=int, default=int(os.environ.get('SLUICE_CORES', '3')))
    ap.add_argument('--faults', dest='faults', action='store_true', default=True)
    ap.add_argument('--no-faults', dest='faults', action='store_false')
    ap.add_argument('--duration', type=int, default=40)
    ap.add_argument('--min-txns', type=int, default=0,
                    help='go on past --duration (up to %d times it) until the producers ended this many '
                         'transactions: a slow machine still gets the workload\'s weight' % MIN_TXNS_STRETCH)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--producers', type=int, default=3)
    ap.add_argument('--copiers', type=int, default=1)
    ap.add_argument('--abort-pct', type=int, default=20)
    ap.add_argument('--hold-ms-max', type=int, default=60,
                    help='a producer holds each transaction open up to this long (sets the rate)')
    ap.add_argument('--work', default=None)
    ap.add_argument('--keep', action='store_true', help='keep the work dir also on success')
    a = ap.parse_args(argv)
    if a.seed is None:
        a.seed = int(os.environ['EOSC_SEED']) if os.environ.get('EOSC_SEED') else random.SystemRandom().getrandbits(31)
    return a


def main(argv):
    a = parse_args(argv)
    run = Run(a)
    ok = False
    try:
        ok = run.main()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        log('ERROR: %s' % e)
        ok = None
    finally:
        for p in run.procs:
            if p.poll() is None:
                run.sig(p, signal.SIGCONT)
                p.kill()
                p.wait()
        if run.broker.alive():
            run.broker.proc.kill()
            run.broker.proc.wait()
    if ok:
        log('PASS (seed %d)' % a.seed)
        if not a.keep:
            shutil.rmtree(run.work, ignore_errors=True)
        return 0
    log('FAIL: seed %d; work dir kept: %s' % (a.seed, run.work))
    log('replay: %s' % run.replay())
    return 2 if ok is None else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
