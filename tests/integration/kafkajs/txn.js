// txn.js BOOTSTRAP OUTFILE - kafkajs 2.2.4 transactions against sluiced (run by ../kafkajs_txn.sh).
//
// Creates topics kjt1 and kjt2 (3 partitions each) and runs five transactions
// with transactionalId "kjs-txn" (idempotent, maxInFlightRequests 1), in the
// order commit, abort, commit, abort, commit. Each sends two batches to every
// partition of both topics, so every transaction has several batches per
// partition. Every record is written to OUTFILE as rdk_txn's --out lines,
// "commit|abort KEY TOPIC PARTITION OFFSET", with the offset worked out from
// the send result's baseOffset; `rdk_txn consume --expect` then checks that
// read_committed sees exactly the committed ones at those offsets.
// Key = value = "kjs.TXN.TOPIC.PARTITION.I" (rdk_txn checks value == key).
'use strict';
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, outFile] = process.argv.slice(2);
const TOPICS = ['kjt1', 'kjt2'];
const PARTITIONS = 3;
const PER_SEND = 4; // records per partition per send
const PLAN = ['commit', 'abort', 'commit', 'abort', 'commit'];
const DEADLINE_MS = 120000;

if (!bootstrap || !outFile) {
  console.error('usage: node txn.js BOOTSTRAP OUTFILE');
  process.exit(2);
}
setTimeout(() => {
  console.error(`kafkajs txn: FAIL: not done after ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS).unref();

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function main() {
  const kafka = new Kafka({
    clientId: 'sluice-kafkajs-txn',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
  });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: TOPICS.map((topic) => ({ topic, numPartitions: PARTITIONS, replicationFactor: 1 })),
    waitForLeaders: true,
  });
  await admin.disconnect();

  const producer = kafka.producer({
    transactionalId: 'kjs-txn',
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 30000,
  });
  await producer.connect();
  const lines = [];
  let i = 0;
  for (let t = 0; t < PLAN.length; t++) {
    const txn = await producer.transaction();
    for (let s = 0; s < 2; s++) {
      for (const topic of TOPICS) {
        const messages = [];
        for (let p = 0; p < PARTITIONS; p++) {
          for (let k = 0; k < PER_SEND; k++) {
            const key = `kjs.${t}.${topic}.${p}.${i++}`;
            messages.push({ key, value: key, partition: p });
          }
        }
        const res = await txn.send({ topic, acks: -1, messages });
        const base = new Map();
        for (const r of res) {
          check(r.topicName === topic && r.errorCode === 0,
                `send to ${topic}: ${JSON.stringify(r)}`);
          base.set(r.partition, Number(r.baseOffset));
        }
        const next = new Map();
        for (const m of messages) {
          check(base.has(m.partition), `no result for ${topic}/${m.partition}`);
          const k = next.get(m.partition) || 0;
          next.set(m.partition, k + 1);
          lines.push(`${PLAN[t]} ${m.key} ${topic} ${m.partition} ${base.get(m.partition) + k}`);
        }
      }
    }
    if (PLAN[t] === 'commit') await txn.commit();
    else await txn.abort();
    console.log(`txn ${t}: ${PLAN[t]} ok`);
  }
  await producer.disconnect();
  fs.writeFileSync(outFile, lines.join('\n') + '\n');
  console.log(`kafkajs txn: OK (${lines.length} records)`);
}

main().then(() => process.exit(0), (e) => {
  console.error(`kafkajs txn: FAIL: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
