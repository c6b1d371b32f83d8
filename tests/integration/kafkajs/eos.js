// eos.js BOOTSTRAP IN OUT GROUP TXN_ID PARTITIONS CHUNK DELAY_MS IDLE_S ABORT_EVERY - one
// instance of a kafkajs 2.2.4 exactly-once copier (run by ../kafkajs_eos.sh,
// which SIGKILLs and restarts it; the kafkajs twin of rdk_eos.c).
//
// A group consumer (read_committed, autoCommit off, eachBatch without
// auto-resolve) and a transactional producer (fixed TXN_ID, idempotent,
// maxInFlightRequests 1). Each transaction copies up to CHUNK records of one
// input partition, key and value unchanged, to the same partition of OUT,
// holds the transaction open DELAY_MS (the application's "work"), sends the
// group's offset (last copied + 1) with transaction.sendOffsets and commits;
// only then is the chunk resolved, so the consumer's position never runs
// ahead of what the group committed.
//
// Order of start-up: the producer's transactional InitProducerId comes first
// (kafkajs sends it on the first producer.transaction(), not on connect): it
// fences the instance this one replaces and has the broker abort its open
// transaction, so the group's offsets are settled before our consumer reads
// them.
//
// On an error inside a transaction the transaction is aborted and the
// partition rewound with consumer.seek to what the group committed, as the
// broker tells it (admin.fetchOffsets). kafkajs itself keeps no such promise:
// with auto-resolve (the default) an aborted batch counts as consumed, and
// sendOffsets has already written the aborted offset into the consumer's
// cache of committed offsets. (Here, without auto-resolve, its next fetch
// would start at the last resolved offset anyway.) Asking the broker also
// checks it: had it applied the aborted transaction's offsets, the rewind
// would skip records and the output check would find them missing.
// Being fenced (a newer instance) is fatal. ABORT_EVERY > 0 makes the
// instance's first transaction and every ABORT_EVERY-th after it fail on
// purpose after their sendOffsets (an application error), so that path runs
// in every test, right after each restart too.
//
// A loop every CHECK_MS compares the group's committed offsets (admin.fetchOffsets) with
// the input's high watermarks (admin.fetchTopicOffsets); when they are equal
// the instance prints "done" and exits 0. IDLE_S seconds without copying
// anything: "idle", exit 1.
//
// stdout: "ready", "assigned [P,...]", "commit K RECORDS pP next OFFSET",
// "abort K WHY", "rewind pP OFFSET", "done K txns A aborts", "idle ...",
// "fatal WHAT". Exit status: 0 done, 1 error/idle/fatal, 2 usage.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, inTopic, outTopic, groupId, txnId, partsArg, chunkArg, delayArg, idleArg, abortArg] =
  process.argv.slice(2);
const PARTITIONS = Number(partsArg);
const CHUNK = Number(chunkArg);
const DELAY_MS = Number(delayArg);
const IDLE_MS = Number(idleArg) * 1000;
const ABORT_EVERY = Number(abortArg);
const CHECK_MS = 500;          // how often the done check asks the broker
const DEADLINE_MS = 170000;    // one instance never outlives the test
const FATAL = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
  'INVALID_PRODUCER_ID_MAPPING', 'INVALID_TXN_STATE']);

if (!bootstrap || !inTopic || !outTopic || !groupId || !txnId || !(PARTITIONS > 0) || !(CHUNK > 0) ||
    !(DELAY_MS >= 0) || !(IDLE_MS > 0) || !(ABORT_EVERY >= 0)) {
  console.error('usage: node eos.js BOOTSTRAP IN OUT GROUP TXN_ID PARTITIONS CHUNK DELAY_MS IDLE_S ABORT_EVERY');
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const say = (line) => process.stdout.write(line + '\n');

function die(what, e) {
  console.error(`kafkajs eos: ${what}: ${e && e.stack ? e.stack : e}`);
  say(`fatal ${what}`);
  process.exit(1);
}

setTimeout(() => die('deadline', `not done after ${DEADLINE_MS} ms`), DEADLINE_MS).unref();

const st = { txns: 0, aborts: 0, lastCopy: Date.now(), finishing: false };

async function main() {
  const kafka = new Kafka({
    clientId: 'sluice-kjs-eos',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  const admin = kafka.admin();
  await admin.connect();

  const producer = kafka.producer({
    transactionalId: txnId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 60000,
    allowAutoTopicCreation: false,
  });
  await producer.connect();
  // The transactional InitProducerId: fences the previous instance and has
  // the broker abort its transaction. An empty transaction sends nothing more.
  await (await producer.transaction()).abort();
  say('ready');

  const consumer = kafka.consumer({
    groupId,
    readUncommitted: false,
    // A killed instance stays a member until its session ends: short keeps restarts quick.
    sessionTimeout: 3000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 100,
  });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    say(`assigned [${(e.payload.memberAssignment[inTopic] || []).slice().sort().join(',')}]`);
  });
  consumer.on(consumer.events.CRASH, (e) => {
    console.error(`kafkajs eos: consumer crashed: ${e.payload.error && e.payload.error.stack}`);
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [inTopic], fromBeginning: true });

  // Back to what the group committed for PARTITION (or 0 without a commit).
  const rewind = async (partition) => {
    const offs = await admin.fetchOffsets({ groupId, topics: [inTopic] });
    const p = offs[0].partitions.find((x) => x.partition === partition);
    const off = p && Number(p.offset) >= 0 ? p.offset : '0';
    consumer.seek({ topic: inTopic, partition, offset: off });
    say(`rewind p${partition} ${off}`);
  };

  // One transaction: MSGS (consecutive records of PARTITION) copied, offset sent, committed.
  const copy = async (partition, msgs) => {
    const txn = await producer.transaction();
    const next = (BigInt(msgs[msgs.length - 1].offset) + 1n).toString();
    try {
      await txn.send({
        topic: outTopic,
        acks: -1,
        messages: msgs.map((m) => ({ key: m.key, value: m.value, partition })),
      });
      if (DELAY_MS) await sleep(DELAY_MS);
      await txn.sendOffsets({
        consumerGroupId: groupId,
        topics: [{ topic: inTopic, partitions: [{ partition, offset: next }] }],
      });
      if (ABORT_EVERY && (st.txns + st.aborts) % ABORT_EVERY === 0) {
        throw Object.assign(new Error('injected application error'), { type: 'injected' });
      }
      await txn.commit();
    } catch (e) {
      if (FATAL.has(e.type)) die(`transaction (${e.type})`, e);
      if (e.type !== 'injected') console.error(`kafkajs eos: transaction on p${partition}: ${e.stack || e}: aborting`);
      try {
        await txn.abort();
      } catch (e2) {
        die('abort', e2);
      }
      say(`abort ${++st.aborts} ${e.type || e.name} ${msgs.length}`);
      await rewind(partition);
      return false;
    }
    say(`commit ${++st.txns} ${msgs.length} p${partition} next ${next}`);
    return true;
  };

  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      const msgs = batch.messages;
      for (let i = 0; i < msgs.length; i += CHUNK) {
        if (!isRunning() || isStale() || st.finishing) return;
        const chunk = msgs.slice(i, i + CHUNK);
        if (!(await copy(batch.partition, chunk))) return;
        st.lastCopy = Date.now();
        resolveOffset(chunk[chunk.length - 1].offset);
        await heartbeat();
      }
    },
  });

  // Done when every partition's committed offset is its high watermark.
  for (;;) {
    await sleep(CHECK_MS);
    const [offs, ends] = await Promise.all([
      admin.fetchOffsets({ groupId, topics: [inTopic] }),
      admin.fetchTopicOffsets(inTopic),
    ]);
    const committed = new Map(offs[0].partitions.map((p) => [p.partition, p.offset]));
    if (ends.length === PARTITIONS && ends.every((p) => committed.get(p.partition) === p.high)) break;
    if (Date.now() - st.lastCopy > IDLE_MS) {
      say(`idle ${st.txns} txns ${st.aborts} aborts: committed ${JSON.stringify([...committed])} ` +
          `ends ${JSON.stringify(ends.map((p) => [p.partition, p.high]))}`);
      process.exit(1);
    }
  }
  st.finishing = true;
  say(`done ${st.txns} txns ${st.aborts} aborts`);
  await consumer.disconnect();
  await producer.disconnect();
  await admin.disconnect();
}

main().then(() => process.exit(0), (e) => die('main', e));
