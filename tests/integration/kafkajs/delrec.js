// delrec.js BOOTSTRAP PHASE - kafkajs 2.2.4's admin.deleteTopicRecords against sluiced (run by
// ../kafkajs_delrec.sh).
//
// PHASE "delete": creates topic kjd (2 partitions), produces 10 records to each, deletes the
// records of partition 0 below offset 4 and of partition 1 below its high watermark (offset
// '-1', as kafkajs sends it for "all"); fetchTopicOffsets then says low 4 and 10; an offset past
// the high watermark is refused; a consumer from the beginning reads partition 0 from offset 4
// (6 records) and nothing of partition 1.
// PHASE "after": (after SIGKILL and a restart) the low watermarks are still 4 and 10.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, phase] = process.argv.slice(2);
const TOPIC = 'kjd';
const N = 10;
const DEADLINE_MS = 120000;

if (!bootstrap || !phase) {
  console.error('usage: node delrec.js BOOTSTRAP delete|after');
  process.exit(2);
}
setTimeout(() => {
  console.error(`kafkajs delrec: FAIL: not done after ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS).unref();

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function lows(admin) {
  const offs = await admin.fetchTopicOffsets(TOPIC);
  const by = {};
  for (const o of offs) by[o.partition] = { low: o.low, high: o.high };
  return by;
}

async function remove(kafka, admin) {
  check(await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 2 }], waitForLeaders: true }),
    'createTopics did not create the topic');
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  for (let p = 0; p < 2; p++) {
    for (let i = 0; i < N; i++) // one batch each
      await producer.send({ topic: TOPIC, acks: -1, messages: [{ key: `k${i}`, value: `v${p}.${i}`, partition: p }] });
  }
  await producer.disconnect();

  // kafkajs looks the leaders up in the metadata it already holds, before it loads the topic's
  // (admin/index.js deleteTopicRecords): a fresh admin must fetch it first, against Kafka too.
  await admin.fetchTopicMetadata({ topics: [TOPIC] });
  await admin.deleteTopicRecords({ topic: TOPIC, partitions: [{ partition: 0, offset: '4' }, { partition: 1, offset: '-1' }] });
  let o = await lows(admin);
  check(o[0].low === '4' && o[0].high === String(N), `partition 0 after deleteTopicRecords: ${JSON.stringify(o[0])}`);
  check(o[1].low === String(N) && o[1].high === String(N), `partition 1 after deleteTopicRecords(-1): ${JSON.stringify(o[1])}`);
  // Below the start: nothing to do, the start stays.
  await admin.deleteTopicRecords({ topic: TOPIC, partitions: [{ partition: 0, offset: '2' }] });
  o = await lows(admin);
  check(o[0].low === '4', `a deleteTopicRecords below the start moved it: ${JSON.stringify(o[0])}`);
  let refused = null;
  try {
    await admin.deleteTopicRecords({ topic: TOPIC, partitions: [{ partition: 0, offset: String(N + 5) }] });
  } catch (e) {
    refused = e;
  }
  check(refused !== null, 'an offset past the high watermark was taken');

  const consumer = kafka.consumer({ groupId: 'kjd-g' });
  await consumer.connect();
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push(`${partition}.${message.offset}`);
        if (partition !== 0 || Number(message.offset) < 4) reject(new Error(`read ${partition}.${message.offset}, below the start`));
        if (message.value.toString() !== `v0.${message.offset}`) reject(new Error(`offset ${message.offset}: ${message.value}`));
        if (seen.length === N - 4) resolve();
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  check(seen.length === N - 4 && seen[0] === '0.4', `consumed ${seen}`);
}

async function after(admin) {
  const o = await lows(admin);
  check(o[0].low === '4' && o[1].low === String(N), `after the restart: ${JSON.stringify(o)}`);
}

async function main() {
  const kafka = new Kafka({ clientId: 'sluice-kafkajs-delrec', brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { retries: 3 } });
  const admin = kafka.admin();
  await admin.connect();
  if (phase === 'delete') await remove(kafka, admin);
  else await after(admin);
  await admin.disconnect();
  console.log(`kafkajs delrec ${phase}: OK`);
}

main().then(() => process.exit(0), (e) => {
  const parts = (e.partitions || (e.originalError && e.originalError.partitions) || [])
    .map((p) => `${p.partition}@${p.offset}: ${p.error && (p.error.type || p.error.message)}`);
  console.error(`kafkajs delrec ${phase}: FAIL: ${e.stack || e} ${parts.join(', ')}`);
  process.exit(1);
});
